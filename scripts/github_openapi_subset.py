#!/usr/bin/env python3
"""Regenerate tests/forge/openapi/api.github.com.subset.json: the part of GitHub's published
OpenAPI description (npm package ``@octokit/openapi``, the pinned version below) that the GitHub
test double (tests/forge/github_double.py) answers, so that its answers are validated against
GitHub's own schemas (tests/forge/openapi_check.py) on a clean clone with no network.

The full description is 13 MB (a 28 MB tarball); the subset keeps, for each operation the double
serves, its documented responses, and every component those reach through ``$ref`` (kept as refs,
not inlined), without examples and prose. The tarball is fetched with ``npm pack`` and its sha512
checked against the integrity npm publishes for the pinned version before anything is read.

Usage: scripts/github_openapi_subset.py [--tarball PATH] [--check]
(--check: exit 1 if the committed subset differs from what the tarball gives)."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
INTEGRITY = "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg=="
MEMBER = "package/generated/api.github.com.json"
OUT = Path(__file__).resolve().parent.parent / "tests" / "forge" / "openapi" / "api.github.com.subset.json"
# the operations the double answers (operationId), REST only: GraphQL has no OpenAPI description
OPERATIONS = (
    "repos/get",
    "repos/get-branch-rules",
    "repos/create-commit-status",
    "repos/get-combined-status-for-ref",
    "checks/list-for-ref",
    "issues/set-labels",
    "pulls/list",
    "pulls/create",
    "pulls/get",
    "pulls/update",
    "pulls/list-files",
    "pulls/list-reviews",
    "pulls/create-review",
    "pulls/merge",
    "pulls/create-reply-for-review-comment",
)
DROP = {"description", "example", "examples", "summary", "externalDocs", "x-github", "title"}


def fetch(dest: Path) -> Path:
    out = subprocess.run(
        ["npm", "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", str(dest), "--silent"],
        check=True,
        capture_output=True,
        text=True,
    )
    return dest / out.stdout.strip().splitlines()[-1]


def verify(tarball: Path) -> None:
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if digest != INTEGRITY:
        sys.exit(f"error: {tarball} is not {PACKAGE}@{VERSION}: sha512 {digest} != pinned {INTEGRITY}")


def strip(node: Any, in_properties: bool = False) -> Any:
    """``node`` without prose and examples (a key of ``properties`` is a field name, kept)."""
    if isinstance(node, dict):
        if in_properties:
            return {k: strip(v) for k, v in node.items()}
        return {k: strip(v, in_properties=k == "properties") for k, v in node.items() if k not in DROP}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node))
    return set()


def subset(spec: dict[str, Any]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") in OPERATIONS:
                paths.setdefault(path, {})[method] = {"operationId": op["operationId"], "responses": strip(op["responses"])}
    missing = set(OPERATIONS) - {op["operationId"] for item in paths.values() for op in item.values()}
    if missing:
        sys.exit(f"error: {PACKAGE}@{VERSION} has no operation {', '.join(sorted(missing))}")
    components: dict[str, dict[str, Any]] = {}
    todo = sorted(refs(paths))
    while todo:
        ref = todo.pop()
        _, _, kind, name = ref.split("/", 3)  # "#/components/schemas/NAME"
        if name in components.get(kind, {}):
            continue
        node = strip(spec["components"][kind][name])
        components.setdefault(kind, {})[name] = node
        todo += sorted(refs(node))
    return {
        "source": {"package": PACKAGE, "version": VERSION, "integrity": INTEGRITY, "file": MEMBER.removeprefix("package/")},
        "openapi": spec["openapi"],
        "paths": dict(sorted(paths.items())),
        "components": {kind: dict(sorted(items.items())) for kind, items in sorted(components.items())},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", type=Path, help="an already downloaded tarball of the pinned version")
    parser.add_argument("--check", action="store_true", help="compare with the committed subset instead of writing it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tarball = args.tarball or fetch(Path(tmp))
        verify(tarball)
        with tarfile.open(tarball) as tar:
            member = tar.extractfile(MEMBER)
            assert member is not None, MEMBER
            spec = json.load(member)
    text = json.dumps(subset(spec), indent=1, sort_keys=False) + "\n"
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.name}: {'matches' if same else 'DIFFERS from'} {PACKAGE}@{VERSION}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text.encode()) // 1024} KB) from {PACKAGE}@{VERSION}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
