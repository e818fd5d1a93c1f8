"""Personal data detection (``kb.privacy``): every kind, its validator, Chinese text, masking,
the ``privacy:`` policy and the hook at ``prepare``."""

from __future__ import annotations

import pytest

from kb.config import Privacy, parse_config
from kb.errors import ConfigError
from kb.intake import Message, prepare, prepare_messages
from kb.privacy import KINDS, TAGS, cn_id_valid, find_personal_data, fingerprint, holds, iban_valid, luhn_valid, mask, mask_values


def found(text: str) -> list[tuple[str, str]]:
    return [(h.kind, h.value) for h in find_personal_data(text)]


# Each kind: text holding one value of it (the value as found), and near misses that must not match.
POSITIVE = [
    ("national_id", "身份证号码是11010519491231002X，请保密。", "11010519491231002X"),
    ("national_id", "My resident id is 440524188001010014.", "440524188001010014"),
    ("ssn", "My SSN is 123-45-6789.", "123-45-6789"),
    ("ssn", "social security number: 078051121", "078051121"),
    ("card", "Card 4111 1111 1111 1111 expires soon.", "4111 1111 1111 1111"),
    ("card", "amex 378282246310005 ok", "378282246310005"),
    ("card", "银行卡号6222-0212-3456-7894，别告诉别人。", None),  # filled below with a Luhn-valid number
    ("iban", "IBAN DE89 3704 0044 0532 0130 00 for rent.", "DE89 3704 0044 0532 0130 00"),
    ("iban", "GB82WEST12345698765432", "GB82WEST12345698765432"),
    ("phone", "Call +44 20 7946 0958 tonight.", "+44 20 7946 0958"),
    ("phone", "我的手机号是13812345678。", "13812345678"),
    ("phone", "Office: (212) 867-5309.", "(212) 867-5309"),
    ("phone", "phone: 020 7946 0958", "020 7946 0958"),
    ("email", "write to alice.smith@gmail.com please", "alice.smith@gmail.com"),
    ("email", "邮箱是wang.fang@qq.com。", "wang.fang@qq.com"),
    ("email", '"Contact:\\nbob.jones@corp.io"', "bob.jones@corp.io"),  # after an escaped line break
    ("ip", "from 203.0.113.5 last night", "203.0.113.5"),
    ("ip", "host 2001:db8::8a2e:370:7334 is up", "2001:db8::8a2e:370:7334"),
    ("ip", "My home IP is 81.2.69.160.", "81.2.69.160"),  # a full stop after it
    ("ip", "服务器地址是203.0.113.77。", "203.0.113.77"),
    ("dob", "I was born on March 3, 1985.", "March 3, 1985"),
    ("dob", "DOB: 1990-02-14", "1990-02-14"),
    ("dob", "我出生于1990年5月6日。", "1990年5月6日"),
    ("address", "I live at 221B Baker Street, London NW1 6XE.", "221B Baker Street, London NW1 6XE"),
    ("address", "Send it to 350 Fifth Avenue, New York, NY 10118.", "350 Fifth Avenue, New York, NY 10118"),
    ("address", "Our HQ: 1 Infinite Loop, Cupertino, CA 95014", "1 Infinite Loop, Cupertino, CA 95014"),
    ("address", "My address is 42 Wallaby Way, Sydney.", "42 Wallaby Way, Sydney"),  # a cue, no postcode
    ("address", "We moved to 12 Oak Lane, Apt 3B last year.", "12 Oak Lane, Apt 3B"),
    ("address", "我住在北京市朝阳区建国路88号。", "北京市朝阳区建国路88号"),
    ("address", "地址：上海市长宁区长乐路123弄4号", "上海市长宁区长乐路123弄4号"),
    ("address", "公司位于广东省深圳市南山区科苑路15号2栋301室，欢迎来访。", "广东省深圳市南山区科苑路15号2栋301室"),
]


def _luhn_complete(prefix: str) -> str:
    """``prefix`` plus the one check digit that makes it pass Luhn."""
    return next(prefix + str(d) for d in range(10) if luhn_valid(prefix + str(d)))


UNIONPAY = _luhn_complete("622202123456789")
POSITIVE[6] = ("card", f"银行卡号{UNIONPAY}，别告诉别人。", UNIONPAY)


@pytest.mark.parametrize("kind,text,value", POSITIVE, ids=[f"{k}-{n}" for n, (k, _t, _v) in enumerate(POSITIVE)])
def test_each_kind_is_found(kind: str, text: str, value: str) -> None:
    assert found(text) == [(kind, value)]


NEGATIVE = [
    "Card 4111 1111 1111 1112 fails Luhn.",  # 16 digits, Luhn fails: not a card
    "order 1234567890123456 shipped",  # 16 digits, no issuer prefix and fails Luhn
    "身份证号11010519491231002Y",  # wrong alphabet for the check character
    "身份证号110105194912310021，校验位错了。",  # 18 digits, wrong check digit: not an id
    "身份证号110105194902301237",  # February 30th: not a date
    "SSN 666-12-3456, 000-12-3456, 900-12-3456, 123-00-4567, 123-45-0000",  # never issued
    "IBAN DE89 3704 0044 0532 0130 01",  # mod-97 fails
    "version 12:30:45 at 10:30",  # times are not IPv6
    "released 2024-05-06, build 1.2.3",
    "mail help@example.com or ops@build.test",  # documentation domains
    "I was born in a small town in 1985.",  # no date of birth in a DOB phrasing
    "DOB: 1990-02-30",  # not a calendar date
    "we met at 10:30 on 2024-05-06; the total was 1,234,567.89",
    "Pay with card [CARD-1].",
    "The support phone number is 555-0100; call (212) 555-0143.",  # 555-0100 to -0199: reserved for examples
    "sources: [ev-7a2882c20ba52604, ev-e963d16478162253]",  # a mobile-like digit run inside an evidence id
    "[^1]: ev-4111111111111111#L3 and build 6b0f13812345678a",  # all-digit id passing Luhn; hex run
    "In 2019 Oxford Street was closed for a week.",  # a year, no postcode, no cue
    "Read chapter 3 Main Street Blues tonight.",  # a house number and a street type, nothing else
    "Section 4 Data Drive explains the storage layer; see 5 Ocean Drive, Miami Vice.",  # no cue, no postcode
    "He lives on 3rd Street.",  # no house number
    "北京市朝阳区是个好地方。",  # a district, no road and number
    "请看第88号文件和建国路。",  # a number, a road, no place
    "路由器3号坏了，换成5号。",  # 路 not a road here
    "\"```python\\n@pytest.fixture\\ndef client():\\n    @app.route('/')\"",  # decorators in a citation's JSON quote
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_near_misses_are_not_found(text: str) -> None:
    assert found(text) == []


def test_validators_directly() -> None:
    assert cn_id_valid("11010519491231002X") and not cn_id_valid("110105194912310021")
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("DE89370400440532013000") and not iban_valid("DE89370400440532013001")
    assert not iban_valid("DE8937040044053201300")  # a digit short for Germany


def test_an_id_is_not_read_as_a_card_too() -> None:
    # 62... is a UnionPay prefix and a Gansu region code; the id rule goes first
    ident = next(f"6201021990010100{d}{c}" for d in range(10) for c in "0123456789X" if cn_id_valid(f"6201021990010100{d}{c}"))
    assert [h.kind for h in find_personal_data(f"证件{ident}")] == ["national_id"]


def test_mask_is_stable_within_a_text_and_typed() -> None:
    text = "Card 4111 1111 1111 1111, again 4111-1111-1111-1111; other 5555 5555 5555 4444. IBAN GB82WEST12345698765432."
    redaction = mask(text, {"card", "iban"})
    assert redaction.text == "Card [CARD-1], again [CARD-1]; other [CARD-2]. IBAN [IBAN-1]."
    assert redaction.masked == {"card": 2, "iban": 1}


def test_mask_numbers_after_placeholders_already_there() -> None:
    assert mask("[CARD-1] was old; new 4111 1111 1111 1111", {"card"}).text == "[CARD-1] was old; new [CARD-2]"


def test_mask_leaves_kinds_not_asked_for_and_allowed_values() -> None:
    text = "Call +44 20 7946 0958, card 4111 1111 1111 1111."
    assert mask(text, {"card"}).text == "Call +44 20 7946 0958, card [CARD-1]."
    allowed = fingerprint("card", "4111-1111-1111-1111")  # the same card, written otherwise
    assert mask(text, {"card"}, [allowed]).text == text
    assert holds(text, {"phone"}) and not holds(text, set())


def test_chinese_text_is_masked_in_place() -> None:
    text = "张伟的身份证号是11010519491231002X，手机13812345678，邮箱wang.fang@qq.com。"
    assert mask(text, set(KINDS)).text == "张伟的身份证号是[ID-1]，手机[PHONE-1]，邮箱[EMAIL-1]。"
    home = "我住在北京市朝阳区建国路88号，公司在上海市浦东新区世纪大道100号；北京市朝阳区建国路88号有人。"
    assert mask(home, {"address"}).text == "我住在[ADDR-1]，公司在[ADDR-2]；[ADDR-1]有人。"


def test_an_address_is_one_value_however_spaced() -> None:
    text = "Ship to 12 Oak Lane, Springfield, IL 62704; again: 12 Oak Lane Springfield, IL  62704."
    assert mask(text, {"address"}).text == "Ship to [ADDR-1]; again: [ADDR-1]."


def test_policy_defaults_and_validation() -> None:
    policy = Privacy()
    assert policy.kinds("mask") == {"national_id", "ssn", "card", "iban"}
    assert policy.kinds("no-copy") == {"phone", "email", "ip", "dob", "address"}
    assert set(KINDS) == set(TAGS) == policy.kinds("mask", "no-copy", "keep")
    config = parse_config("version: 1\nprivacy:\n  card: keep\n  phone: mask\n")
    assert config.privacy.card == "keep" and config.privacy.phone == "mask" and config.privacy.iban == "mask"
    with pytest.raises(ConfigError, match=r"`privacy.card`: Input should be 'keep', 'mask' or 'no-copy'"):
        parse_config("version: 1\nprivacy:\n  card: hide\n")
    with pytest.raises(ConfigError, match="unknown key `privacy.passport`"):
        parse_config("version: 1\nprivacy:\n  passport: mask\n")
    with pytest.raises(ConfigError, match="never put the personal data itself here") as caught:
        parse_config("version: 1\nprivacy:\n  allow: ['4111 1111 1111 1111']\n")
    assert "4111" not in str(caught.value)


def test_prepare_masks_what_the_policy_masks_and_counts_it() -> None:
    data = b"Card 4111 1111 1111 1111. Phone +44 20 7946 0958.\n"
    item = prepare(data, "n.md", "document", "user:alice")
    assert item.content == "Card [CARD-1]. Phone +44 20 7946 0958.\n"  # phone: no-copy, kept in evidence
    assert item.meta["masked"] == {"card": 1}
    kept = prepare(data, "n.md", "document", "user:alice", privacy=Privacy(card="keep"))
    assert "4111 1111 1111 1111" in kept.content and "masked" not in kept.meta
    assert kept.id != item.id  # the id is the stored content's
    phone_masked = prepare(data, "n.md", "document", "user:alice", privacy=Privacy(phone="mask"))
    assert phone_masked.content == "Card [CARD-1]. Phone [PHONE-1].\n"


def test_prepare_messages_masks_a_conversation_line_by_line() -> None:
    messages = [Message("user", "我的银行卡是4111111111111111。"), Message("assistant", "Noted 4111111111111111.")]
    item = prepare_messages(messages, "s1", "user:wang")
    assert item.content == "user: 我的银行卡是[CARD-1]。\nassistant: Noted [CARD-1].\n"


def test_mask_values_numbers_after_placeholders_and_never_rewrites_one() -> None:
    text = "[PERSON-1] met Ana Souza and Ana; PERSON is a word; Ana Souza again."
    redaction = mask_values(text, [("person", "Ana"), ("person", "Ana Souza"), ("person", "PERSON"), ("person", "Zoe")])
    # the longer value first (so "Ana Souza" is one name), a value inside a placeholder left alone
    assert redaction.text == "[PERSON-1] met [PERSON-2] and [PERSON-4]; [PERSON-3] is a word; [PERSON-2] again."
    assert redaction.masked == {"person": 3}
