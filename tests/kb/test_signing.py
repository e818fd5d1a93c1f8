"""Review signatures: the SSHSIG format (interoperable with ssh-keygen), keys, allowed signers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kb.errors import ConfigError, SignatureError
from kb.signing import NAMESPACE, load_key, load_or_create_key, parse_allowed_signers, sign, signer_line, verify

# Made by OpenSSH: `ssh-keygen -t ed25519` and `ssh-keygen -Y sign -n kb-review` over MESSAGE, so
# these tests prove the format without needing ssh-keygen on the machine that runs them.
OPENSSH_PUBLIC = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4k3yH+BgFS/xGDo6Hmyte5IVNZdpYLw31IUlIBWKg1"
MESSAGE = b'{"head":"abc","verdict":"approve"}'
OPENSSH_SIGNATURE = """-----BEGIN SSH SIGNATURE-----
U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgHiTfIf4GAVL/EYOjoebK17khU1
l2lgvDfUhSUgFYqDUAAAAJa2ItcmV2aWV3AAAAAAAAAAZzaGE1MTIAAABTAAAAC3NzaC1l
ZDI1NTE5AAAAQLUy7dHee7/DDvu7TjUckcctflzpyq5AuJq0vPUflJXMaruRcYBJMEx6b4
TNpaGuCWN6CQ3T9IyBgZUXqg5fhQk=
-----END SSH SIGNATURE-----
"""


def test_a_signature_made_by_ssh_keygen_verifies() -> None:
    assert verify(OPENSSH_SIGNATURE, MESSAGE) == OPENSSH_PUBLIC


@pytest.mark.parametrize(
    ("message", "namespace", "words"),
    [
        (MESSAGE.replace(b"approve", b"approvE"), NAMESPACE, "does not verify"),
        (MESSAGE, "git", "is for namespace 'kb-review', not 'git'"),
    ],
)
def test_a_changed_message_or_another_namespace_is_refused(message: bytes, namespace: str, words: str) -> None:
    with pytest.raises(SignatureError, match=words):
        verify(OPENSSH_SIGNATURE, message, namespace)


@pytest.mark.parametrize(
    "armored",
    [
        "",
        "approved",
        "-----BEGIN SSH SIGNATURE-----\n!!!!\n-----END SSH SIGNATURE-----\n",
        OPENSSH_SIGNATURE.replace("U1NIU0lH", "U1NIU0lI"),
    ],
)
def test_what_is_not_a_signature_is_refused_not_a_crash(armored: str) -> None:
    with pytest.raises(SignatureError):
        verify(armored, MESSAGE)


def test_our_signature_round_trips_and_names_our_key(tmp_path: Path) -> None:
    key, created = load_or_create_key(tmp_path / "k")
    assert created and (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "k").read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    signature = sign(key, MESSAGE)
    assert signature.startswith("-----BEGIN SSH SIGNATURE-----\n") and all(len(line) <= 70 for line in signature.splitlines())
    assert verify(signature, MESSAGE) == key.public
    again, created_again = load_or_create_key(tmp_path / "k")
    assert not created_again and again.public == key.public
    assert os.listdir(tmp_path) == ["k"]  # no temporary file left behind


def test_a_key_file_that_is_not_an_openssh_ed25519_key_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "k").write_text("not a key\n")
    with pytest.raises(SignatureError, match="is not an unencrypted OpenSSH private key"):
        load_key(tmp_path / "k")
    with pytest.raises(SignatureError, match="no review signing key at"):
        load_key(tmp_path / "absent")


def test_allowed_signers_lines_comments_and_namespaces(tmp_path: Path) -> None:
    key, _ = load_or_create_key(tmp_path / "k")
    text = (
        "# reviewers\n\n"
        + signer_line("ci@example.invalid", key)
        + f'"alice@example.invalid,bob@example.invalid" namespaces="git,file" {OPENSSH_PUBLIC} a comment\n'
        + f"carol@example.invalid {OPENSSH_PUBLIC}\n"
    )
    ci, others, carol = parse_allowed_signers(text)
    assert ci.allows("ci@example.invalid", key.public) and not ci.allows("bob@example.invalid", key.public)
    assert not ci.allows("ci@example.invalid", OPENSSH_PUBLIC)
    assert others.principals == ("alice@example.invalid", "bob@example.invalid") and others.line == 4
    assert not others.allows("alice@example.invalid", OPENSSH_PUBLIC)  # not for kb-review
    assert carol.namespaces is None and carol.allows("carol@example.invalid", OPENSSH_PUBLIC)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (f"ci@example.invalid valid-before=20300101 {OPENSSH_PUBLIC}", "option 'valid-before' is not supported"),
        (f"ci@example.invalid cert-authority {OPENSSH_PUBLIC}", "option 'cert-authority' is not supported"),
        ("ci@example.invalid ssh-rsa AAAAB3NzaC1yc2E", "key type 'ssh-rsa' is not supported"),
        ("ci@example.invalid", "needs principals, then a key type and a key"),
    ],
)
def test_an_allowed_signer_line_kb_cannot_honour_is_refused(line: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        parse_allowed_signers("# header\n" + line + "\n")
    assert caught.value.line == 2 and caught.value.exit_code == 4
