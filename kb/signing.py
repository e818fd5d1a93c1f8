"""Signatures of review records: git's SSH signing format (SSHSIG) with Ed25519 keys, and an
allowed-signers file committed in the repository.

What ``ssh-keygen -Y sign -n kb-review`` writes and ``ssh-keygen -Y verify`` checks, so a review's
signature can be checked without kb: an armored ``SSH SIGNATURE`` over the SHA-512 of the message,
bound to a namespace. The private key of the reviewing process lives outside the repository
(``$KB_SIGNING_KEY``, else ``$XDG_CONFIG_HOME/kb/review_ed25519``, else
``~/.config/kb/review_ed25519``; an unencrypted OpenSSH Ed25519 key); its public key is listed
in ``reviewers/allowed_signers`` (the allowed-signers format of ``ssh-keygen(1)``: principals,
options, key) on main. docs/review.md explains the choices.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kb.errors import ConfigError, ConflictError, SignatureError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from kb.repo import Repo

NAMESPACE = "kb-review"
SIGNERS_FILE = "reviewers/allowed_signers"
KEY_ENV = "KB_SIGNING_KEY"
KEY_NAME = "review_ed25519"
KEY_TYPE = "ssh-ed25519"
_MAGIC = b"SSHSIG"
_VERSION = 1
_HASH = "sha512"
_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_END = "-----END SSH SIGNATURE-----"
SIGNERS_HEADER = (
    "# Who may sign kb reviews (ssh-keygen allowed-signers format: principal, options, public key).\n"
    "# Changed only on main, by a person: `kb keygen` adds this machine's key. docs/review.md\n"
)


def key_path() -> Path:
    """Where the reviewing process's private key is: ``$KB_SIGNING_KEY``, else the user's config folder."""
    explicit = os.environ.get(KEY_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(config_home).expanduser() if config_home else Path.home() / ".config"
    return base / "kb" / KEY_NAME


@dataclass(frozen=True)
class SigningKey:
    path: Path
    private: Ed25519PrivateKey

    @property
    def public(self) -> str:
        """The public key as an allowed-signers file names it: ``ssh-ed25519 <base64>``."""
        from cryptography.hazmat.primitives import serialization

        return self.private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode("ascii")


def load_key(path: Path | None = None) -> SigningKey:
    """The signing key at ``path`` (default ``key_path()``); SignatureError when it is absent or unusable."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = path or key_path()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SignatureError(
            f"no review signing key at {path}", hint="run `kb keygen` (it creates the key and allows it in reviewers/allowed_signers)"
        ) from None
    except OSError as exc:
        raise SignatureError(
            f"cannot read the review signing key {path}: {exc.strerror}", hint=f"check the file, or set ${KEY_ENV}"
        ) from None
    try:
        private = serialization.load_ssh_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SignatureError(
            f"{path} is not an unencrypted OpenSSH private key ({exc})",
            hint=f"point ${KEY_ENV} at an unencrypted Ed25519 key, or remove the file and run `kb keygen`",
        ) from None
    if not isinstance(private, Ed25519PrivateKey):
        raise SignatureError(f"{path} is not an Ed25519 key", hint=f"point ${KEY_ENV} at an Ed25519 key (`ssh-keygen -t ed25519`)")
    return SigningKey(path, private)


def load_or_create_key(path: Path | None = None) -> tuple[SigningKey, bool]:
    """The key at ``path``, created first when absent (mode 0600, never overwriting one made meanwhile)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = path or key_path()
    if path.exists():
        return load_key(path), False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if another process made the key meanwhile: use that one
        created = True
    except FileExistsError:
        created = False
    finally:
        tmp.unlink()
    return load_key(path), created


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _read_string(blob: bytes, at: int) -> tuple[bytes, int]:
    if at + 4 > len(blob):
        raise ValueError("truncated")
    (size,) = struct.unpack(">I", blob[at : at + 4])
    end = at + 4 + size
    if end > len(blob):
        raise ValueError("truncated")
    return blob[at + 4 : end], end


def _signed_data(message: bytes, namespace: str) -> bytes:
    digest = hashlib.sha512(message).digest()
    return _MAGIC + _string(namespace.encode()) + _string(b"") + _string(_HASH.encode()) + _string(digest)


def sign(key: SigningKey, message: bytes, namespace: str = NAMESPACE) -> str:
    """An armored SSH signature of ``message`` (what ``ssh-keygen -Y sign -n NAMESPACE`` writes)."""
    from cryptography.hazmat.primitives import serialization

    raw_public = key.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    public_blob = _string(KEY_TYPE.encode()) + _string(raw_public)
    signature_blob = _string(KEY_TYPE.encode()) + _string(key.private.sign(_signed_data(message, namespace)))
    blob = (
        _MAGIC
        + struct.pack(">I", _VERSION)
        + _string(public_blob)
        + _string(namespace.encode())
        + _string(b"")
        + _string(_HASH.encode())
        + _string(signature_blob)
    )
    text = base64.b64encode(blob).decode("ascii")
    return "\n".join([_BEGIN, *(text[i : i + 70] for i in range(0, len(text), 70)), _END]) + "\n"


def verify(armored: str, message: bytes, namespace: str = NAMESPACE) -> str:
    """The public key (``ssh-ed25519 <base64>``) whose signature over ``message`` ``armored`` is.

    Raises SignatureError when it is not an SSH signature, is bound to another namespace, or does
    not verify. Who may sign is the caller's question (``AllowedSigner.allows``).
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    lines = [line.strip() for line in armored.strip().splitlines()]
    if len(lines) < 3 or lines[0] != _BEGIN or lines[-1] != _END:
        raise SignatureError("the signature is not an armored SSH signature")
    try:
        blob = base64.b64decode("".join(lines[1:-1]), validate=True)
        if blob[:6] != _MAGIC or struct.unpack(">I", blob[6:10])[0] != _VERSION:
            raise ValueError("not SSHSIG version 1")
        public_blob, at = _read_string(blob, 10)
        signed_namespace, at = _read_string(blob, at)
        _reserved, at = _read_string(blob, at)
        hash_name, at = _read_string(blob, at)
        signature_blob, at = _read_string(blob, at)
        key_type, inner = _read_string(public_blob, 0)
        raw_public, _ = _read_string(public_blob, inner)
        sig_type, inner = _read_string(signature_blob, 0)
        raw_signature, _ = _read_string(signature_blob, inner)
    except (ValueError, struct.error) as exc:
        raise SignatureError(f"the signature cannot be read ({exc})") from None
    if key_type.decode(errors="replace") != KEY_TYPE or sig_type.decode(errors="replace") != KEY_TYPE:
        raise SignatureError(f"the signature is by a {key_type.decode(errors='replace')} key; only {KEY_TYPE} is accepted")
    if signed_namespace.decode(errors="replace") != namespace:
        raise SignatureError(f"the signature is for namespace {signed_namespace.decode(errors='replace')!r}, not {namespace!r}")
    if hash_name.decode(errors="replace") != _HASH:
        raise SignatureError(f"the signature uses hash {hash_name.decode(errors='replace')!r}; kb signs with {_HASH}")
    try:
        Ed25519PublicKey.from_public_bytes(raw_public).verify(raw_signature, _signed_data(message, namespace))
    except (InvalidSignature, ValueError):
        raise SignatureError("the signature does not verify: the signed record was changed, or it was never signed by that key") from None
    return f"{KEY_TYPE} {base64.b64encode(public_blob).decode('ascii')}"


@dataclass(frozen=True)
class AllowedSigner:
    """One line of an allowed-signers file."""

    principals: tuple[str, ...]
    namespaces: tuple[str, ...] | None  # None: any namespace
    key: str  # "ssh-ed25519 <base64>"
    line: int

    def allows(self, principal: str, key: str, namespace: str = NAMESPACE) -> bool:
        return key == self.key and principal in self.principals and (self.namespaces is None or namespace in self.namespaces)


def _split_options(text: str) -> list[str]:
    """``a,b="x,y",c`` -> ``['a', 'b="x,y"', 'c']``: commas inside quotes stay."""
    out, current, quoted = [], "", False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == "," and not quoted:
            out.append(current)
            current = ""
        else:
            current += char
    return [*out, current]


def _tokens(line: str) -> list[str]:
    """Whitespace-separated fields; a quoted part keeps its spaces (and its quotes)."""
    out, current, quoted = [], "", False
    for char in line:
        if char == '"':
            quoted = not quoted
        if char.isspace() and not quoted:
            if current:
                out.append(current)
            current = ""
        else:
            current += char
    return [*out, current] if current else out


def parse_allowed_signers(text: str, path: str = SIGNERS_FILE) -> list[AllowedSigner]:
    """The lines of an allowed-signers file. Only the ``namespaces`` option is honoured; a line
    with any other option (``cert-authority``, ``valid-after``, ``valid-before``) is refused, so
    that nothing it restricts is silently ignored."""
    signers = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = _tokens(line)
        if len(fields) < 3:
            raise ConfigError("an allowed signer needs principals, then a key type and a key", path=path, line=number, hint=_FORMAT_HINT)
        principals = tuple(p.strip('"') for p in fields[0].strip('"').split(",") if p.strip('"'))
        namespaces: tuple[str, ...] | None = None
        rest = fields[1:]
        if not rest[0].startswith(("ssh-", "ecdsa-", "sk-")):
            for option in _split_options(rest[0]):
                name, _, value = option.partition("=")
                if name.lower() != "namespaces":
                    raise ConfigError(f"allowed-signers option {name!r} is not supported (only namespaces)", path=path, line=number)
                namespaces = tuple(n.strip() for n in value.strip('"').split(",") if n.strip())
            rest = rest[1:]
        if len(rest) < 2:
            raise ConfigError(
                "an allowed signer needs a key type and a key after its principals", path=path, line=number, hint=_FORMAT_HINT
            )
        if rest[0] != KEY_TYPE:
            raise ConfigError(f"key type {rest[0]!r} is not supported (only {KEY_TYPE})", path=path, line=number)
        signers.append(AllowedSigner(principals, namespaces, f"{rest[0]} {rest[1]}", number))
    return signers


_FORMAT_HINT = f'write `PRINCIPAL namespaces="{NAMESPACE}" ssh-ed25519 KEY`, or let `kb keygen` add the line'


def signer_line(principal: str, key: SigningKey) -> str:
    return f'{principal} namespaces="{NAMESPACE}" {key.public}\n'


def allowed_signers(repo: Repo) -> list[AllowedSigner]:
    """The allowed signers committed on main (HEAD of the main checkout), never a branch's own."""
    head = repo.head()
    data = None if head is None else repo.read_at(head, SIGNERS_FILE)
    if data is None:
        return []
    return parse_allowed_signers(data.decode("utf-8", errors="replace"))


def principal_of(repo: Repo, key: SigningKey) -> str:
    """The principal under which ``key`` may sign reviews in ``repo``; SignatureError when none."""
    for signer in allowed_signers(repo):
        if signer.key == key.public and signer.principals and (signer.namespaces is None or NAMESPACE in signer.namespaces):
            return signer.principals[0]
    raise SignatureError(
        f"the review signing key {key.path} is not an allowed signer of this repository ({SIGNERS_FILE} on main)",
        hint="run `kb keygen` to allow it (a commit on main), or set $KB_SIGNING_KEY to an allowed key",
    )


@dataclass(frozen=True)
class KeygenResult:
    key: SigningKey
    principal: str
    created: bool  # the key file was made now
    added: bool  # the key was added to the allowed signers now (a commit on main)


def allow_local_key(repo: Repo, principal: str | None = None) -> KeygenResult:
    """Create this machine's key if absent and list it in ``reviewers/allowed_signers`` on main."""
    key, created = load_or_create_key()
    principal = (principal or repo.signature().email or "kb-reviewer").strip()
    if not principal or any(c.isspace() or c in ',"' for c in principal):
        raise ConfigError(f"principal {principal!r} may not contain spaces, commas or quotes", hint="pass --principal NAME@HOST")
    signers = allowed_signers(repo)
    if any(s.allows(principal, key.public) for s in signers):
        return KeygenResult(key, principal, created, False)
    if repo.dirty_paths((SIGNERS_FILE,)):
        raise ConflictError(f"{SIGNERS_FILE} has uncommitted changes", hint="commit or discard them, then run `kb keygen` again")
    target = repo.root / SIGNERS_FILE
    text = target.read_text(encoding="utf-8") if target.exists() else SIGNERS_HEADER
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + ("" if text.endswith("\n") else "\n") + signer_line(principal, key), encoding="utf-8")
    repo.commit_worktree_paths([SIGNERS_FILE], f"kb: allow {principal} to sign reviews\n")
    return KeygenResult(key, principal, created, True)
