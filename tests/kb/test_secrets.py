"""The secret scanner: credentials of every kind are found (issue 10, item 4); placeholders,
names and code in documentation are not (issue 12, item 8); findings carry a fingerprint and
never the secret; an allowed fingerprint is not reported."""

from __future__ import annotations

import pytest

from kb.secrets import find_secrets, fingerprint

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzK8q3Lm2Rp"  # shaped like one, not a real key
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI4ODQxMjMiLCJyb2xlIjoiYWRtaW4ifQ.Zq3k9V_2xRmT8wLpYc4NbHdF7sJgA1eKuO6iQy0zWvE"

POSITIVES = [
    ("aws_secret_access_key = " + AWS_SECRET, "AWS secret access key"),
    ('AWS_SECRET_ACCESS_KEY="' + AWS_SECRET + '"', "AWS secret access key"),
    ('{"SecretAccessKey": "' + AWS_SECRET + '"}', "AWS secret access key"),
    ("keys: AKIAQ4XMPLR7ZT2KW9NB " + AWS_SECRET, "AWS secret access key"),
    ("AKIAQ4XMPLR7ZT2KW9NB\n" + AWS_SECRET + "\n", "AWS secret access key"),
    ("AKIAQ4XMPLR7ZT2KW9NB", "AWS access key id"),
    ("my password is hunter2!Xq", "password in prose"),
    ("The password for the db is Tr0ub4dor&3.", "password in prose"),
    ("btw the passphrase was zX81-pLq-Rr7 so keep it", "password in prose"),
    ("DATABASE_URL=postgres://user:pa55w0rd@host/db", "password in a URL"),
    ("see https://deploy:Kq7!mZ2x@example.org/x", "password in a URL"),
    ("token glpat-Xy7Rq2LmN8vK3pT9wZ4b", "GitLab token"),
    ("//registry.npmjs.org/:_authToken=npm_a8Kd72JqLmX0pZrT4vBn9WcYe1FhUgSi3oQk", "npm token"),
    ("Authorization: Bearer " + JWT, "JSON web token"),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=q8Zr7Xw2LpN4tK9mB3vY6cF1hJ5dG0sA+eR/uI2oP7kL==;EndpointSuffix=core.windows.net",
        "Azure key in a connection string",
    ),
    (
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=Jd8Kq2Lm9XzR4tVb7NcW1pYs6FgH3aE0uIoQ5rTy+Zk=",
        "Azure key in a connection string",
    ),
    ('password = "hunter22"', "password in clear"),
    ("db_password: Xk9#mQ2v", "password in clear"),
    ("password: hunter2", "password in clear"),
    ("api_key=Zk39fLq8Rt2Vx7Nc", "key or token in clear"),
    ("client_secret: 'a8F3kL0qZx7RtV2m'", "key or token in clear"),
    ("key sk-proj-abcdefghijklmnopqrstuvwxyz0123", "OpenAI API key"),
    ("ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "GitHub token"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi8sJpX2l7vQmKx4pRfN0wYd\n-----END RSA PRIVATE KEY-----\n",
        "private key",
    ),
]

NEGATIVES = [
    'password="secret"',
    'password = "changeme"',
    "self.access_token = access_token",
    'api_key=os.environ["X"]',
    "api_key = os.getenv('OPENAI_API_KEY')",
    "password: str = Field(...)",
    "password=settings.DB_PASSWORD",
    "api_key: <your-key>",
    "api_key = 'xxxxxxxxxxxxxxxx'",
    "token: ${TOKEN}",
    "password: ${DB_PASSWORD}",
    "api_key = '{{ api_key }}'",
    'password = "example"',
    'api_key = "dummy-key-for-tests"',
    "password = None",
    "password = getpass()",
    "postgresql://scott:tiger@localhost/test",
    "postgres://user:password@localhost:5432/db",
    "redis://:${REDIS_PASSWORD}@cache:6379/0",
    "https://user:<password>@host/path",
    "http://localhost:8080/api/v1",
    "the password is stored in the vault and rotated weekly",
    "The password is required when the account has no key.",
    "Your password is `None` until you set one",
    "my password is P@ssw0rd in every tutorial",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "glpat-xxxxxxxxxxxxxxxxxxxx",
    "AccountKey=<your-account-key>;EndpointSuffix=core.windows.net",
    "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
    "commit 3f2a9c1b7e4d8a6f0b5c2e9d1a7f4b8c3e6d0a2f touched AKIA-free code",
    "the access_token field holds the bearer token",
    "api_key: os.environ/OPENAI_API_KEY",
    'api_key="sk-api-key"',
    "-p api_key=sk-123",
    "-H 'x-api-key: $LITELLM_API_KEY'",
    "api_key: Optional[str] = None,",
    # code and names met in the sources of installed packages
    "SECRET_KEY = 'AWS_SECRET_ACCESS_KEY'",
    'HEADER = "X-Xet-Access-Token"',
    "def __init__(self, username: bytes, password: bytes) -> None: ...",
    'headers = {"x-api-key": langsmith_api_key}',
    "if (raw_password := self.raw_password) is None:",
    "model = Model(password='IAmSensitive')",
    'raise HTTPException(detail="Current password is incorrect.")',
    'api_key="best-api-key-ever"',
    "api_key:\n    headers = build(token)",
    "https://jo%40email.com:a%20secret@www.example.com",
    "ARGILLA_API_KEY=_credentials_api_key,",
    "api_key: _AzureApiKeyT | None,",
]


@pytest.mark.parametrize(("text", "kind"), POSITIVES)
def test_credentials_are_found(text: str, kind: str) -> None:
    hits = find_secrets(text)
    assert kind in {h.kind for h in hits}, (text, hits)


@pytest.mark.parametrize("text", NEGATIVES)
def test_placeholders_names_and_code_are_not_secrets(text: str) -> None:
    assert find_secrets(text) == [], text


def test_a_finding_has_place_and_fingerprint_but_never_the_secret() -> None:
    text = "intro\n\nnotes: the password for the db is Tr0ub4dor&3\n"
    (hit,) = find_secrets(text)
    assert (hit.line, hit.kind) == (3, "password in prose")
    assert hit.column == text.splitlines()[2].index("Tr0ub4dor") + 1
    assert hit.fingerprint == fingerprint("password in prose", "Tr0ub4dor&3")
    assert len(hit.fingerprint) == 16 and "Tr0ub4dor" not in repr(hit) and "Tr0ub4dor" not in hit.describe("notes.md")
    assert hit.describe("notes.md") == f"notes.md:3: password in prose (fingerprint {hit.fingerprint})"


def test_an_allowed_fingerprint_is_not_reported_and_others_still_are() -> None:
    text = "password: hunter22\nDATABASE_URL=postgres://app:pa55w0rd@db/app\n"
    hits = find_secrets(text)
    assert [h.kind for h in hits] == ["password in clear", "password in a URL"]
    assert [h.kind for h in find_secrets(text, allow={hits[0].fingerprint})] == ["password in a URL"]
    # a fingerprint belongs to the value: another password on the same line is still found
    assert find_secrets("password: hunter23\n", allow={hits[0].fingerprint})[0].kind == "password in clear"


def _installed_docs() -> list[tuple[str, str]]:
    """The Markdown and README text that installed packages ship: real documentation, on disk
    wherever kb's dependencies are installed (litellm's guides, every distribution's METADATA)."""
    from importlib.metadata import distributions

    docs = {}
    for dist in distributions():
        for file in dist.files or ():
            name = str(file)
            if name.endswith((".md", ".rst")) or name.endswith(".dist-info/METADATA"):
                path = file.locate()
                if path.is_file() and path.stat().st_size < 2_000_000:
                    docs[str(path)] = path.read_text(encoding="utf-8", errors="replace")
    return sorted(docs.items())


def test_documentation_shipped_with_the_dependencies_has_no_findings() -> None:
    docs = _installed_docs()
    assert len(docs) >= 50  # litellm alone ships about a hundred Markdown guides
    findings = [hit.describe(path) for path, text in docs for hit in find_secrets(text)]
    # PyJWT's README (a dependency of mcp) prints a real, well-formed HS256 token signed with
    # "secret": a credential by its form, which a team would allow by its fingerprint as here.
    reviewed = ("fingerprint b505116db860a6a0",)
    assert [f for f in findings if not f.endswith(tuple(f"({r})" for r in reviewed))] == []
