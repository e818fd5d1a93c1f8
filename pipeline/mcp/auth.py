"""Bearer tokens for ``kb mcp --http``: a static token file mapping each token's SHA-256 to a
principal and its scopes (a local stand-in for an OAuth authorization server; the SDK's
``TokenVerifier`` protocol is the seam for a real one).

The file (YAML, outside the repository: it holds credentials' digests, never the tokens)::

    tokens:
      - name: alice-laptop
        sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
        principal: user:alice
        scopes: [kb:read, kb:remember]
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kb.errors import FormatError, UsageError
from kb.scopes import parse_principal
from kb.yamltext import YamlProblem, load_yaml

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

KNOWN_SCOPES = ("kb:read", "kb:remember", "kb:propose", "kb:forget")


@dataclass(frozen=True)
class TokenGrant:
    name: str
    digest: str
    principal: str
    scopes: tuple[str, ...]


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return "kbt_" + secrets.token_urlsafe(32)


def load_grants(path: Path) -> list[TokenGrant]:
    """The grants of a token file; a malformed file is a FormatError naming what is wrong."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), 1024 * 1024)
    except OSError as err:
        raise UsageError(f"cannot read the token file {path}: {err.strerror}", hint="pass --tokens FILE (docs/mcp.md)") from None
    except (YamlProblem, UnicodeDecodeError) as err:
        raise FormatError(f"{path}: {err}", hint="the token file is YAML: see docs/mcp.md") from None
    rows = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise FormatError(f"{path}: expected a `tokens:` list", hint="see docs/mcp.md for the token file's format")
    grants = []
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise FormatError(f"{path}: token #{n} is not a mapping", hint="each token has sha256, principal and scopes")
        digest, principal, scopes = str(row.get("sha256", "")).lower(), str(row.get("principal", "")), row.get("scopes")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise FormatError(f"{path}: token #{n}: sha256 must be 64 hex digits", hint="kb mcp token prints a new entry")
        parse_principal(principal)  # system or user:<id>, else a UsageError
        if not isinstance(scopes, list) or not scopes or any(s not in KNOWN_SCOPES for s in scopes):
            raise FormatError(f"{path}: token #{n}: scopes must be a list of {', '.join(KNOWN_SCOPES)}", hint="e.g. scopes: [kb:read]")
        grants.append(TokenGrant(str(row.get("name") or f"#{n}"), digest, principal, tuple(scopes)))
    return grants


class StaticTokenVerifier:
    """The SDK's ``TokenVerifier`` over a token file's grants (constant-time digest comparison)."""

    def __init__(self, grants: list[TokenGrant]) -> None:
        self.grants = grants

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        digest = token_digest(token)
        for grant in self.grants:
            if hmac.compare_digest(digest, grant.digest):
                return AccessToken(token=token, client_id=grant.name, scopes=list(grant.scopes), subject=grant.principal)
        return None
