"""Secret detection shared by ``evidence add`` (refuses) and ``kb check`` (reports).

Two kinds of rule, as dedicated scanners (gitleaks, detect-secrets) have them:

- **Token formats** that are credentials by shape: cloud and model-provider keys, GitHub,
  GitLab, npm, Slack and Stripe tokens, JWTs, private key blocks, Azure connection-string keys,
  and an unlabelled AWS secret key next to an AWS key id.
- **Keyword rules** whose value is only a secret if it looks like one: ``password = ...``,
  ``api_key: ...``, ``postgres://user:PASS@host``, "my password is ...". Here documentation is
  full of placeholders (``password="secret"``, ``<your-key>``, ``${TOKEN}``) and code
  (``self.access_token = access_token``, ``api_key=os.environ["X"]``), so a value is dropped
  when it is a known placeholder, contains a placeholder word, is an identifier or a code
  expression, or has too little variety (character classes, Shannon entropy) for its kind.

A finding never carries the secret text. It carries a *fingerprint*: a slow salted hash of the
kind and the matched value (PBKDF2, so that a printed fingerprint of a weak password cannot be
turned back into it by a quick dictionary run). A reviewed finding is allowed by listing its
fingerprint under ``secrets.allow`` in ``kb.config.yaml``.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass

FINGERPRINT_RE = re.compile(r"^[0-9a-f]{16}$")
_FINGERPRINT_ROUNDS = 20_000


@dataclass(frozen=True)
class SecretHit:
    kind: str
    line: int  # 1-based
    column: int
    fingerprint: str  # never the secret itself

    def describe(self, where: str, stored: bool = False) -> str:
        """``where:line: kind (fingerprint ...)``; ``stored``: the line is the stored form's (a
        conversation's, one message per line), not the input file's."""
        place = f"{where}: stored line {self.line}" if stored else f"{where}:{self.line}"
        return f"{place}: {self.kind} (fingerprint {self.fingerprint})"


def fingerprint(kind: str, value: str) -> str:
    digest = hashlib.pbkdf2_hmac("sha256", value.encode("utf-8"), f"kb-secret:{kind}".encode(), _FINGERPRINT_ROUNDS)
    return digest.hex()[:16]


# ---- what a value must look like -------------------------------------------------------

PLACEHOLDERS = frozenset(
    {
        "secret",
        "password",
        "passwd",
        "changeme",
        "change_me",
        "changeit",
        "example",
        "dummy",
        "test",
        "testing",
        "sample",
        "placeholder",
        "redacted",
        "hidden",
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "empty",
        "foo",
        "bar",
        "foobar",
        "admin",
        "root",
        "user",
        "username",
        "pass",
        "token",
        "apikey",
        "api_key",
        "mysecret",
        "mypassword",
        "s3cr3t",
        "p@ssw0rd",
        "passw0rd",
        "p@ssword",
        "password1",
        "password123",
        "letmein",
        "qwerty",
        "123456",
        "12345678",
        "abc123",
        "tiger",
        "scott",
    }
)
# A value containing one of these is documentation, not a credential.
_PLACEHOLDER_PARTS = re.compile(
    r"(?i)example|dummy|placeholder|redacted|changeme|change[_-]?me|your[_-]?|my[_-]?(?:api|secret|token|key|pass)|"
    r"fake|sample|xxxx|environ|getenv|process\.env|secret|passw|sensitive|\*\*\*|\.\.\.|…|<[^>]*>|\$\{|\{\{|%\(|%s|^\$|^<|^\[|^\{"
)
# Words without digits, joined or not (`access_token`, `X-Api-Key`, `AWSSecretKey`): a name
# (of a variable, a header, an environment variable), not a credential.
_NAME = re.compile(r"^_*[A-Za-z]+(?:[_.\-/][A-Za-z]+)*_*$")
_EXPRESSION = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$|^[A-Za-z_][\w.]*[(\[]")


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _classes(text: str) -> int:
    return sum(
        (
            any(c.islower() for c in text),
            any(c.isupper() for c in text),
            any(c.isdigit() for c in text),
            any(not c.isalnum() for c in text),
        )
    )


def is_placeholder(value: str) -> bool:
    bare = value.strip().strip("'\"`")
    if not bare or bare.lower() in PLACEHOLDERS or _PLACEHOLDER_PARTS.search(bare):
        return True
    return len(set(bare.lower())) <= 2  # "xxxxxx", "000000", "abab"


def _random_letters(value: str) -> bool:
    """Letters only, yet a key: long, mixed case, no separators, high entropy."""
    return value.isalpha() and len(value) >= 20 and _classes(value) >= 2 and entropy(value) >= 4.0


def _token_like(value: str) -> bool:
    """A token by shape (it matched a vendor format): only placeholders are ruled out."""
    return not is_placeholder(value) and entropy(value) >= 3.0


def _password_like(value: str) -> bool:
    return len(value) >= 6 and not is_placeholder(value) and _classes(value) >= 2 and entropy(value) >= 2.0


def _key_like(value: str) -> bool:
    return len(value) >= 12 and not is_placeholder(value) and _classes(value) >= 2 and entropy(value) >= 3.0


# ---- the rules --------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    accept: Callable[[str], bool]
    group: str | int = 0  # the part of the match that is the secret
    code: bool = False  # an unquoted value may be a name or an expression, not a literal
    markers: tuple[str, ...] = ()  # one of these occurs in the lowercased text, or the rule cannot match

    def accepts(self, match: re.Match[str]) -> bool:
        value = match.group(self.group)
        if not value or not self.accept(value):
            return False
        if self.code:
            if not match.groupdict().get("q") and _EXPRESSION.match(value):
                return False
            return not _NAME.match(value) or _random_letters(value)
        return True


_PASSWORD_WORD = r"password|passwd|pwd|passphrase"
_KEY_WORD = r"secret[_-]?key|client[_-]?secret|api[_-]?key|access[_-]?token|auth[_-]?token"
# `KEY = value`, `KEY: value`, `"KEY": "value"`, `KEY := value`, `KEY => value`; the value quoted or bare
# (on one line; an unquoted value ends at a bracket, as code closes one after it)
_ASSIGNED = r"\b[\"']?[ \t]*(?::=|=>|[:=])[ \t]*(?P<q>[\"'`]?)(?P<v>[^\s\"'`,;)\]}]+)(?P=q)"

RULES: tuple[Rule, ...] = (
    Rule(
        "private key",
        re.compile(
            r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----[^-]{0,300}?(?P<v>[A-Za-z0-9+/]{40,})"
        ),
        _token_like,
        "v",
    ),
    Rule("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), _token_like),
    Rule(
        "AWS secret access key",
        re.compile(r"(?i)\baws_?secret_?(?:access_?)?key\b[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
        _key_like,
        "v",
    ),
    Rule(
        "AWS secret access key",
        re.compile(r"\bSecretAccessKey[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
        _key_like,
        "v",
    ),
    Rule("OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), _token_like),
    Rule("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}"), _token_like),
    Rule("GitHub token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{40,}\b"), _token_like),
    Rule("GitLab token", re.compile(r"\bgl(?:pat|dt|ptt|rt|soat)-[A-Za-z0-9_\-]{20,}"), _token_like),
    Rule("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"), _token_like),
    Rule("Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"), _token_like),
    Rule("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), _token_like),
    Rule("Stripe secret key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{20,}\b"), _token_like),
    Rule("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{16,}"), _token_like),
    Rule(
        "Azure key in a connection string",
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey|SharedAccessSignature)\s*=\s*(?P<v>[A-Za-z0-9+/%&=:-]{20,}?)(?=;|\s|[\"']|$)"),
        _key_like,
        "v",
    ),
    Rule(
        "password in a URL",
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/@\"'<>]{0,64}:(?P<v>[^\s:/@\"'<>]{1,128})@[A-Za-z0-9.\-\[]"),
        _password_like,
        "v",
    ),
    Rule(
        "password in clear",
        re.compile(rf"(?i)(?<![A-Za-z0-9])(?P<k>{_PASSWORD_WORD}){_ASSIGNED}"),
        _password_like,
        "v",
        code=True,
    ),
    Rule(
        "key or token in clear",
        re.compile(rf"(?i)(?<![A-Za-z0-9])(?P<k>{_KEY_WORD}){_ASSIGNED}"),
        _key_like,
        "v",
        code=True,
    ),
    Rule(
        "password in prose",
        re.compile(
            r"(?i)\bpass(?:word|phrase|code)\b(?:\s+(?:for|of|to|on)(?:\s+[\w.@-]+){1,3}?)?"
            r"\s+(?:is|was|has\s+been\s+set\s+to|is\s+set\s+to)[ \t]*:?[ \t]*[\"'`]?(?P<v>[^\s\"'`]{3,}?[^\s\"'`.,;:!?])[\"'`]?(?=[.,;:!?)]*(?:\s|$))"
        ),
        _password_like,
        "v",
    ),
)


def _vendor_placeholder(value: str) -> bool:
    """A vendor-format match that is documentation: ``ghp_xxxx...``, ``sk-...EXAMPLE``, ``<token>``."""
    return bool(_VENDOR_PLACEHOLDER.search(value)) or len(set(value.lower())) <= 4


_VENDOR_PLACEHOLDER = re.compile(r"(?i)example|dummy|placeholder|redacted|xxxx|your[_-]|fake|sample|\.\.\.|…|<[^>]*>|\$\{|\{\{|^\$")


def _strong_password(value: str) -> bool:
    """A password given without a separator ("with the password Vn3$xq8Lp"): it must look made,
    not like a word of the sentence: letters and digits or symbols, eight or more characters."""
    return (
        len(value) >= 8
        and _password_like(value)
        and any(c.isalpha() for c in value)
        and any(not c.isalpha() for c in value)
        and _classes(value) >= 3
    )


def _made_password(value: str) -> bool:
    """A password after "is", ":" or its like in prose: a letter and a digit or symbol, so that
    words ("the passcode is on the fridge") and numbers are not passwords."""
    return _password_like(value) and any(c.isalpha() for c in value) and any(not c.isalpha() for c in value)


# The word for a password in the languages kb meets; in the ones written without spaces the word
# may sit inside a longer one (数据库密码, WLAN-Passwort).
_PROSE_WORD = (
    r"(?:(?<![A-Za-z])(?:pass(?:word|phrase|code)s?|passwd|pwd|pw|passwort|kennwort|zugangscode|mot\s+de\s+passe|"
    r"contrase(?:ñ|n)a|senha|parola\s+d'ordine|wachtwoord|lösenord|hasło|heslo|пароль)(?![A-Za-z])|密码|密碼|口令|パスワード|暗証番号|비밀번호)"
)
# what may stand between the word and its value: "for the NAS", "für den Router", "du serveur", "del wifi"
_PROSE_OWNER = (
    r"(?:[ \t]+(?:for|of|to|on|at|für|fürs|vom|von|zum|zur|du|de|des|del|della|do|da|van|voor|för|dla)"
    r"(?:[ \t]+[\w.@'’-]+){1,3}?)?"
)
_PROSE_SEPARATOR = (
    r"(?:[ \t]*[:=：][ \t]*|[ \t]+(?:is|was|are|is\s+now|has\s+been\s+(?:set|changed)\s+to|is\s+set\s+to|ist|lautet|lautete|war|"
    r"est|était|es|era|é|è|är|jest|je|—|-|–)[ \t]*:?[ \t]*|[ \t]*(?:是|为|為|は|が|는|은)[ \t]*:?[ \t]*)"
)
_PROSE_MARKERS = (
    "pass", "pw", "kennwort", "zugangscode", "contrase", "senha", "parola", "wachtwoord", "lösenord", "hasło", "heslo", "пароль",
    "密码", "密碼", "口令", "パスワード", "暗証番号", "비밀번호",
)  # fmt: skip
_PROSE_VALUE = r"[\"'`“”‘’«»„]?(?P<v>[!-~]{5,63}?[^\s\"'`.,;:!?)\]])[\"'`“”‘’«»]?(?=[.,;:!?)\]。，！？、]*(?:\s|$|[^!-~]))"

EXTRA_RULES: tuple[Rule, ...] = (
    Rule("Discord bot token", re.compile(r"(?<![\w-])[MNO][A-Za-z0-9]{23,27}\.[\w-]{6}\.[\w-]{27,40}(?![\w-])"), _token_like),
    Rule(
        "Discord webhook",
        re.compile(r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{16,21}/(?P<v>[\w-]{60,70})"),
        _token_like,
        "v",
        markers=("/api/webhooks/",),
    ),
    Rule("Telegram bot token", re.compile(r"(?<![\w:])\d{8,10}:AA[\w-]{33}(?![\w-])"), _token_like, markers=(":aa",)),
    Rule(
        "token in an Authorization header",
        re.compile(r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:bearer|token|bot|apikey)[ \t]+(?P<v>[\w\-.~+/=]{16,})"),
        _key_like,
        "v",
        markers=("authorization",),
    ),
    Rule(
        "password on a mysql command line",
        re.compile(r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b[^\n]*?[ \t]-p(?P<v>[^\s\"'`]{4,})"),
        _password_like,
        "v",
        markers=("mysql", "mariadb"),
    ),
    Rule(
        "password in a netrc",
        re.compile(r"\bmachine[ \t]+\S+(?:[ \t]+login[ \t]+\S+)?[ \t]+password[ \t]+(?P<v>\S+)"),
        _password_like,
        "v",
        markers=("machine",),
    ),
    Rule(
        "password in a pgpass line",
        re.compile(r"(?m)^[\w.\-*]+:(?:\d{2,5}|\*):[\w.\-*]+:[\w.\-*@]+:(?P<v>\S{6,})$"),
        _made_password,
        "v",
    ),
    Rule(
        "password in prose",
        re.compile(rf"(?i){_PROSE_WORD}{_PROSE_OWNER}{_PROSE_SEPARATOR}{_PROSE_VALUE}"),
        _made_password,
        "v",
        code=True,
        markers=_PROSE_MARKERS,
    ),
    Rule(
        "password in prose",
        re.compile(
            rf"(?i)(?:\b(?:with|using|use|mit|avec|con|com)[ \t]+(?:the|my|a|dem|meinem|le|mon|la|el|mi|o|a)?[ \t]*{_PROSE_WORD}|(?<![A-Za-z]){_PROSE_WORD}(?=[ \t]+[!-~]*\d))"
            rf"[ \t]+{_PROSE_VALUE}"
        ),
        _strong_password,
        "v",
        code=True,
        markers=_PROSE_MARKERS,
    ),
)

_BASIC = re.compile(r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?basic[ \t]+(?P<v>[A-Za-z0-9+/]{8,}={0,2})")
_DOCKER_AUTH = re.compile(r"[\"']auth[\"']\s*:\s*[\"'](?P<v>[A-Za-z0-9+/]{8,}={0,2})[\"']")


def _encoded_credentials(text: str) -> list[tuple[str, int, str]]:
    """``user:password`` in base64: an ``Authorization: Basic`` header, a Docker ``auths`` entry."""
    out = []
    for kind, pattern in (("Authorization: Basic credentials", _BASIC), ("Docker registry auth", _DOCKER_AUTH)):
        for match in pattern.finditer(text):
            try:
                decoded = base64.b64decode(match.group("v"), validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                continue
            user, colon, password = decoded.partition(":")
            if colon and user and _password_like(password):
                out.append((kind, match.start("v"), match.group("v")))
    return out


_AWS_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_BARE_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_NEAR = 300  # characters either side of an AWS key id where its secret would be


def _bare_aws_secrets(text: str) -> list[tuple[str, int, str]]:
    """An unlabelled 40-character secret key next to an AWS key id (CSV exports, prose)."""
    out = []
    for key_id in _AWS_ID.finditer(text):
        start = max(0, key_id.start() - _NEAR)
        for match in _BARE_AWS_SECRET.finditer(text, start, key_id.end() + _NEAR):
            value = match.group(0)
            if _classes(value) >= 3 and entropy(value) >= 4.0 and not is_placeholder(value):
                out.append(("AWS secret access key", match.start(), value))
    return out


# Substring markers rule out almost every text cheaply for kb's first rules; the later ones
# carry their own.
_MARKERS = (
    "private key", "akia", "asia", "secretaccesskey", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "glpat-", "gldt-", "glptt-", "glrt-", "glsoat-", "npm_", "aiza", "xox", "k_live_", "eyj", "accountkey",
    "sharedaccess", "://", "pass", "pwd", "secret", "key", "token",
)  # fmt: skip


def _kb_candidates(text: str) -> list[tuple[str, int, str]]:
    out = []
    lowered = text.lower()
    first = any(marker in lowered for marker in _MARKERS)
    for rule in (*(RULES if first else ()), *EXTRA_RULES):
        if rule.markers and not any(marker in lowered for marker in rule.markers):
            continue
        for match in rule.pattern.finditer(text):
            if rule.accepts(match):
                out.append((rule.kind, match.start(rule.group), match.group(rule.group)))
    return out + _bare_aws_secrets(text) + _encoded_credentials(text)


def _published_candidates(text: str) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str]]]:
    """gitleaks' findings (``kb.gitleaks``) that kb's own judgement keeps: a vendor format only
    when the value is no placeholder; a keyword rule (``api_key = ...``, ``adafruit ... = ...``)
    only when the value is no placeholder, name or code expression either. Vendor formats
    first, keyword rules second."""
    from kb.gitleaks import scan

    vendor: list[tuple[str, int, str]] = []
    keyword: list[tuple[str, int, str]] = []
    for rule, start, value in scan(text):
        if rule.by_keyword:
            if _key_like(value) and not _EXPRESSION.match(value) and (not _NAME.match(value) or _random_letters(value)):
                keyword.append((rule.kind, start, value))
        elif not _vendor_placeholder(value):
            vendor.append((rule.kind, start, value))
    return vendor, keyword


def find_secrets(text: str, allow: Collection[str] = ()) -> list[SecretHit]:
    """The secrets in ``text``, minus those whose fingerprint is in ``allow``; sorted by place.

    kb's own rules come first, then gitleaks' vendor formats, then its keyword rules: where two
    findings overlap, the first is kept, so that one credential is one finding (and a finding
    keeps the kind, hence the fingerprint, it had before the published rules were added)."""
    vendor, keyword = _published_candidates(text)
    kept: list[tuple[int, int, str, str]] = []  # (start, end, kind, value)
    for kind, start, value in (*_kb_candidates(text), *vendor, *keyword):
        end = start + len(value)
        if any(start < e and s < end for s, e, _, _ in kept):
            continue
        kept.append((start, end, kind, value))
    hits = []
    for start, _, kind, value in kept:
        mark = fingerprint(kind, value)
        if mark in allow:
            continue
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        hits.append(SecretHit(kind, line, column, mark))
    return sorted(hits, key=lambda h: (h.line, h.column, h.kind))
