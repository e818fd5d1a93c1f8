"""Personal data detection (kb.privacy): precision and recall per kind on a small labelled set,
and the throughput of redaction at ingest (``kb.intake.redact_personal`` with the default policy).

The labelled set is written by hand for this benchmark (English and Chinese sentences, with
near misses: numbers failing their checksums, times, versions, documentation domains,
street-like titles, a district without a road); it is
small and its authors wrote the detector, so read the figures as a regression check, not as a
measure on real data. Run: python bench/privacy_detection.py
"""

from __future__ import annotations

import time
from collections import Counter

from kb.config import Privacy
from kb.intake import redact_personal
from kb.privacy import KINDS, find_personal_data, normalise

# (text, [(kind, value), ...]) -- every personal value in the text, by kind
LABELLED: list[tuple[str, list[tuple[str, str]]]] = [
    ("My card is 4111 1111 1111 1111, please charge it.", [("card", "4111 1111 1111 1111")]),
    ("Use the Amex 3782-822463-10005 for the hotel.", [("card", "3782-822463-10005")]),
    ("Mastercard 5555555555554444 expires 04/27.", [("card", "5555555555554444")]),
    ("The order number is 4111 1111 1111 1112.", []),
    ("Tracking id 1234 5678 9012 3456 arrived.", []),
    ("我的银行卡号是6222021234567890120，工资卡。", []),  # Luhn fails
    ("我的信用卡是4012888888881881。", [("card", "4012888888881881")]),
    ("身份证号11010519491231002X，出差登记用。", [("national_id", "11010519491231002X")]),
    ("他的身份证是440524188001010014。", [("national_id", "440524188001010014")]),
    ("身份证号110105194912310021有误。", []),
    ("My SSN is 078-05-1120.", [("ssn", "078-05-1120")]),
    ("Social security number: 219 09 9999", [("ssn", "219 09 9999")]),
    ("Invalid SSN 666-45-6789 and 900-12-3456 in the sample.", []),
    ("Part number 123-45-6789-00 is in stock.", []),
    ("Pay rent to IBAN DE89 3704 0044 0532 0130 00.", [("iban", "DE89 3704 0044 0532 0130 00")]),
    ("UK account GB82WEST12345698765432 for refunds.", [("iban", "GB82WEST12345698765432")]),
    ("French IBAN FR14 2004 1010 0505 0001 3M02 606 on file.", [("iban", "FR14 2004 1010 0505 0001 3M02 606")]),
    ("Typo IBAN DE89 3704 0044 0532 0130 01.", []),
    ("Call me on +44 20 7946 0958 after six.", [("phone", "+44 20 7946 0958")]),
    ("My number is (212) 867-5309.", [("phone", "(212) 867-5309")]),
    ("The film's number (212) 555-0143 is fictional.", []),  # 555-0100 to 555-0199: reserved for fiction
    ("我的手机号是13812345678，随时打。", [("phone", "13812345678")]),
    ("手机：139 1234 5678", [("phone", "139 1234 5678")]),
    ("电话：010-62345678", [("phone", "010-62345678")]),
    ("Reach the office at +86 10 6234 5678.", [("phone", "+86 10 6234 5678")]),
    ("mobile 07700 900123", [("phone", "07700 900123")]),
    ("The meeting room is 212-B on floor 5.", []),
    ("It costs 1,299.00 and ships on 2024-05-06.", []),
    ("Email alice.smith@gmail.com for the slides.", [("email", "alice.smith@gmail.com")]),
    ("我的邮箱是wang.fang@qq.com。", [("email", "wang.fang@qq.com")]),
    ("Docs use bob@example.com as the sample address.", []),
    ("Write to j.doe+travel@outlook.co.uk.", [("email", "j.doe+travel@outlook.co.uk")]),
    ("My home IP is 81.2.69.160.", [("ip", "81.2.69.160")]),
    ("服务器地址是203.0.113.77。", [("ip", "203.0.113.77")]),
    ("The VPN gave me 2001:db8:85a3::8a2e:370:7334.", [("ip", "2001:db8:85a3::8a2e:370:7334")]),
    ("We upgraded to version 3.11.4 at 12:30:45.", []),
    ("I was born on March 3, 1985 in Leeds.", [("dob", "March 3, 1985")]),
    ("DOB: 1990-02-14", [("dob", "1990-02-14")]),
    ("Date of birth: 04/07/1979.", [("dob", "04/07/1979")]),
    ("我出生于1990年5月6日。", [("dob", "1990年5月6日")]),
    ("我的生日是1988-11-23。", [("dob", "1988-11-23")]),
    ("The company was born in 1985 in a garage.", []),
    ("My birthday is in May.", []),
    ("I moved to Porto on March 3, 2021.", []),
    ("I live at 221B Baker Street, London NW1 6XE.", [("address", "221B Baker Street, London NW1 6XE")]),
    ("Ship the parcel to 1600 Pennsylvania Avenue NW, Washington, DC 20500.",
     [("address", "1600 Pennsylvania Avenue NW, Washington, DC 20500")]),
    ("Our new home is 17 Cherry Tree Close, Leeds LS6 2AB.", [("address", "17 Cherry Tree Close, Leeds LS6 2AB")]),
    ("My address is 42 Wallaby Way, Sydney.", [("address", "42 Wallaby Way, Sydney")]),
    ("We moved to 12 Oak Lane last spring.", [("address", "12 Oak Lane")]),
    ("Meet me at 7 Pine St. at noon.", [("address", "7 Pine St.")]),  # no cue, no postcode: a known miss
    ("我住在北京市朝阳区建国路88号。", [("address", "北京市朝阳区建国路88号")]),
    ("快递寄到上海市长宁区长乐路123弄4号。", [("address", "上海市长宁区长乐路123弄4号")]),
    ("公司地址：广东省深圳市南山区科苑路15号2栋301室。", [("address", "广东省深圳市南山区科苑路15号2栋301室")]),
    ("他家在杭州市西湖区文三路478号华星时代广场A座。", [("address", "杭州市西湖区文三路478号")]),
    ("In 2019 Oxford Street was closed for a week.", []),
    ("Read chapter 3 Main Street Blues tonight.", []),
    ("北京市朝阳区是个好地方。", []),
    ("路由器3号坏了，换成5号。", []),
    ("The 100 Best Places to visit in spring.", []),
    ("Alice, card 4111111111111111, phone +1 415 867 0199, mail alice@fastmail.com.",
     [("card", "4111111111111111"), ("phone", "+1 415 867 0199"), ("email", "alice@fastmail.com")]),
]  # fmt: skip


def evaluate() -> dict[str, tuple[int, int, int]]:
    """kind -> (true positives, false positives, false negatives), values compared normalised."""
    counts: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    for text, gold in LABELLED:
        want = {(k, normalise(k, v)) for k, v in gold}
        got = {(h.kind, h.normalised) for h in find_personal_data(text)}
        for kind, _ in got & want:
            counts[kind]["tp"] += 1
        for kind, _ in got - want:
            counts[kind]["fp"] += 1
        for kind, _ in want - got:
            counts[kind]["fn"] += 1
    return {k: (c["tp"], c["fp"], c["fn"]) for k, c in counts.items()}


def throughput() -> tuple[float, int]:
    """MB/s of redaction (default policy) over about 1 MB of mixed text with personal data."""
    block = "\n".join(text for text, _ in LABELLED) + "\n" + "An ordinary sentence about travel plans and window seats. " * 40 + "\n"
    text = block * max(1, 1_000_000 // len(block.encode()))
    size = len(text.encode())
    start = time.perf_counter()
    redact_personal(text, {}, Privacy())
    return size / (time.perf_counter() - start) / 1e6, size


def main() -> None:
    print("| kind | labelled values | precision | recall |")
    print("|---|---|---|---|")
    for kind, (tp, fp, fn) in evaluate().items():
        if not tp + fp + fn:  # person, health: found by the optional model detector only
            continue
        precision = f"{tp / (tp + fp):.2f}" if tp + fp else "-"
        recall = f"{tp / (tp + fn):.2f}" if tp + fn else "-"
        print(f"| {kind} | {tp + fn} | {precision} | {recall} |")
    rate, size = throughput()
    print(f"\nredaction throughput: {rate:.2f} MB/s over {size:,} bytes")


if __name__ == "__main__":
    main()
