"""``kb mcp``: serve the knowledge base to agents over MCP (stdio, or Streamable HTTP), and
``kb mcp install`` / ``kb mcp token`` to set clients up (docs/mcp.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from kb.cli.common import AsOpt, echo, open_repo
from kb.errors import UsageError

mcp_app = typer.Typer(
    help="Serve the knowledge base to agents over MCP (stdio by default; --http for Streamable HTTP).\n\nExample: kb mcp --as user:alice",
    invoke_without_command=True,
)


@mcp_app.callback()
def serve(
    ctx: typer.Context,
    principal: AsOpt = "system",
    http: Annotated[
        bool, typer.Option("--http", help="Serve Streamable HTTP instead of stdio (bearer tokens decide the principal).")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="Address to bind with --http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port with --http.", min=1, max=65535)] = 8765,
    tokens: Annotated[Path | None, typer.Option("--tokens", help="Token file for --http (docs/mcp.md).")] = None,
    writes: Annotated[bool, typer.Option("--writes", help="Also offer kb_remember and kb_propose (never a merge).")] = False,
) -> None:
    """Serve MCP tools (kb_overview, kb_search, kb_read, kb_grep, kb_evidence, kb_memory_context,
    kb_history, kb_change_status; with --writes kb_remember and kb_propose) and page resources.

    Example: kb mcp --as user:alice        (stdio, for a desktop client or coding agent)
    Example: kb mcp --http --tokens ~/.config/kb/mcp-tokens.yaml --writes
    """
    if ctx.invoked_subcommand is not None:
        return
    from kb.scopes import parse_principal
    from pipeline.mcp.server import ServerOptions, build_server

    parse_principal(principal)
    repo = open_repo()
    if not http:
        build_server(repo, ServerOptions(principal=principal, writes=writes)).run("stdio")
        return
    if tokens is None:
        raise UsageError("--http needs --tokens FILE", hint="create one with `kb mcp token --as user:ID --tokens FILE` (docs/mcp.md)")
    from mcp.server.auth.settings import AuthSettings

    from pipeline.mcp.auth import StaticTokenVerifier, load_grants

    verifier = StaticTokenVerifier(load_grants(tokens))
    url = f"http://{host}:{port}"
    auth = AuthSettings(issuer_url=url, resource_server_url=f"{url}/mcp", validate_token_resource=False)  # type: ignore[arg-type]
    server = build_server(repo, ServerOptions(writes=writes, http=True), token_verifier=verifier, auth=auth)
    typer.echo(f"kb mcp: serving {repo.root} on {url}/mcp", err=True)
    server.run("streamable-http", host=host, port=port, stateless_http=True, json_response=True)


@mcp_app.command("token")
def token(
    tokens: Annotated[Path, typer.Option("--tokens", help="The token file to add the new token's digest to.")],
    principal: AsOpt = "system",
    scopes: Annotated[list[str] | None, typer.Option("--scope", help="kb:read (default), kb:remember, kb:propose; repeatable.")] = None,
    name: Annotated[str, typer.Option("--name", help="A name for the token (shown in logs).")] = "token",
) -> None:
    """Create a bearer token: its digest goes into the token file, the token itself is printed once.

    Example: kb mcp token --tokens ~/.config/kb/mcp-tokens.yaml --as user:alice --scope kb:read --scope kb:remember
    """
    import yaml

    from kb.scopes import parse_principal
    from pipeline.mcp.auth import KNOWN_SCOPES, load_grants, new_token, token_digest

    parse_principal(principal)
    chosen = list(dict.fromkeys(scopes or ["kb:read"]))
    unknown = [s for s in chosen if s not in KNOWN_SCOPES]
    if unknown:
        raise UsageError(f"unknown scope {unknown[0]!r}", hint=f"use {', '.join(KNOWN_SCOPES)}")
    rows = [vars(g) | {"sha256": g.digest} for g in load_grants(tokens)] if tokens.exists() else []
    secret = new_token()
    rows.append({"name": name, "sha256": token_digest(secret), "principal": principal, "scopes": chosen})
    entries = [{"name": r["name"], "sha256": r["sha256"], "principal": r["principal"], "scopes": list(r["scopes"])} for r in rows]
    tokens.parent.mkdir(parents=True, exist_ok=True)
    tokens.write_text(yaml.safe_dump({"tokens": entries}, sort_keys=False), encoding="utf-8")
    tokens.chmod(0o600)
    echo(secret)


HOSTS = ("claude-desktop", "cursor", "vscode", "codex", "json")


@mcp_app.command("install")
def install(
    host: Annotated[str, typer.Argument(help="claude-desktop | cursor | vscode (JSON mcpServers) | codex (TOML) | json (print it)")],
    principal: AsOpt = "system",
    config: Annotated[Path | None, typer.Option("--config", help="The client's configuration file to add kb to.")] = None,
    writes: Annotated[bool, typer.Option("--writes", help="Let the client add evidence and open changes.")] = False,
) -> None:
    """Add a `kb` MCP server entry (stdio, this repository, one principal) to a client's configuration.

    Example: kb mcp install cursor --as user:alice --config ~/.cursor/mcp.json
    """
    import shutil
    import sys

    from kb.scopes import parse_principal

    if host not in HOSTS:
        raise UsageError(f"unknown client {host!r}", hint=f"use one of: {', '.join(HOSTS)}")
    parse_principal(principal)
    repo = open_repo()
    command = shutil.which("kb") or sys.argv[0]
    args = ["--repo", str(repo.root), "mcp", "--as", principal, *(["--writes"] if writes else [])]
    if host == "codex":
        quoted = ", ".join(json.dumps(a) for a in args)
        entry = f"\n[mcp_servers.kb]\ncommand = {json.dumps(command)}\nargs = [{quoted}]\n"
        if config is None:
            echo(entry.strip())
            return
        text = config.read_text(encoding="utf-8") if config.exists() else ""
        if "[mcp_servers.kb]" in text:
            raise UsageError(f"{config} has a kb server already", hint="edit or remove its [mcp_servers.kb] table first")
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(text + entry, encoding="utf-8")
        echo(f"added kb to {config}")
        return
    key = "servers" if host == "vscode" else "mcpServers"
    server = {"command": command, "args": args} | ({"type": "stdio"} if host == "vscode" else {})
    if config is None:
        echo(json.dumps({key: {"kb": server}}, indent=2))
        return
    from kb.errors import FormatError

    try:
        data = json.loads(config.read_text(encoding="utf-8")) if config.exists() and config.read_text(encoding="utf-8").strip() else {}
    except json.JSONDecodeError as err:
        raise FormatError(f"{config} is not valid JSON ({err.msg}, line {err.lineno})", hint="fix the file, then run this again") from None
    if not isinstance(data, dict) or not isinstance(data.setdefault(key, {}), dict):
        raise FormatError(f"{config}: `{key}` is not an object", hint="fix the file, then run this again")
    data[key]["kb"] = server
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    echo(f"added kb to {config}")
