"""``kb mcp install``, ``kb mcp token`` and the refusals of ``kb mcp`` itself, through the CLI."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import yaml

from pipeline.mcp.auth import load_grants, token_digest
from tests.builders import make_sample_repo


def test_install_adds_a_stdio_entry_and_keeps_other_servers(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    result = cli("--repo", str(repo.root), "mcp", "install", "cursor", "--as", "user:alice", "--config", str(config))
    assert result.code == 0, result.err
    data = json.loads(config.read_text())
    assert data["mcpServers"]["other"] == {"command": "x"}
    assert data["mcpServers"]["kb"]["args"] == ["--repo", str(repo.root), "mcp", "--as", "user:alice"]
    codex = tmp_path / "config.toml"
    assert cli("--repo", str(repo.root), "mcp", "install", "codex", "--writes", "--config", str(codex)).code == 0
    assert tomllib.loads(codex.read_text())["mcp_servers"]["kb"]["args"][-1] == "--writes"
    again = cli("--repo", str(repo.root), "mcp", "install", "codex", "--config", str(codex))
    assert again.code == 2 and "has a kb server already" in again.err


def test_install_refuses_a_broken_config_and_an_unknown_client(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = cli("--repo", str(repo.root), "mcp", "install", "claude-desktop", "--config", str(broken))
    assert result.code == 5 and "is not valid JSON" in result.err and "Traceback" not in result.err
    assert broken.read_text() == "{not json"
    unknown = cli("--repo", str(repo.root), "mcp", "install", "emacs")
    assert unknown.code == 2 and "unknown client 'emacs'" in unknown.err


def test_token_prints_a_token_once_and_stores_only_its_digest(cli, tmp_path: Path) -> None:
    tokens = tmp_path / "cfg" / "tokens.yaml"
    result = cli("mcp", "token", "--tokens", str(tokens), "--as", "user:alice", "--scope", "kb:read", "--scope", "kb:remember")
    assert result.code == 0, result.err
    secret = result.out.strip()
    assert secret.startswith("kbt_") and secret not in tokens.read_text()
    (grant,) = load_grants(tokens)
    assert grant.digest == token_digest(secret) and grant.principal == "user:alice" and grant.scopes == ("kb:read", "kb:remember")
    assert cli("mcp", "token", "--tokens", str(tokens), "--as", "system").code == 0
    assert len(yaml.safe_load(tokens.read_text())["tokens"]) == 2
    bad = cli("mcp", "token", "--tokens", str(tokens), "--scope", "kb:merge")
    assert bad.code == 2 and "unknown scope 'kb:merge'" in bad.err


def test_serve_refusals(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    no_tokens = cli("--repo", str(repo.root), "mcp", "--http")
    assert no_tokens.code == 2 and "--http needs --tokens" in no_tokens.err
    malformed = tmp_path / "tokens.yaml"
    malformed.write_text("tokens:\n  - sha256: abc\n    principal: user:alice\n    scopes: [kb:read]\n")
    bad = cli("--repo", str(repo.root), "mcp", "--http", "--tokens", str(malformed))
    assert bad.code == 5 and "sha256 must be 64 hex digits" in bad.err
    principal = cli("--repo", str(repo.root), "mcp", "--as", "user:Alice")
    assert principal.code == 2 and "Traceback" not in principal.err
