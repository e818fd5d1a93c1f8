"""The GitHub test double's answers are checked against GitHub's OpenAPI description: a shape
GitHub would not send (a wrong enum value, a missing field, an invented field, an undocumented
status, an unknown operation) fails the test using the double, when the double stops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scripts.github_openapi_subset import INTEGRITY, OPERATIONS, VERSION
from tests.forge.github_double import GitHubDouble
from tests.forge.openapi_check import SUBSET, divergences

PULL = "/repos/acme/kb/pulls/1"


def test_the_committed_subset_is_the_pinned_package_and_small() -> None:
    spec = json.loads(SUBSET.read_text(encoding="utf-8"))
    assert spec["source"] == {
        "package": "@octokit/openapi",
        "version": VERSION,
        "integrity": INTEGRITY,
        "file": "generated/api.github.com.json",
    }
    assert sorted(op["operationId"] for item in spec["paths"].values() for op in item.values()) == sorted(OPERATIONS)
    assert SUBSET.stat().st_size < 300 * 1024


def test_wrong_shapes_are_divergences() -> None:
    merged = {"sha": "a" * 40, "merged": True, "message": "Pull Request successfully merged"}
    assert divergences("PUT", f"{PULL}/merge", 200, merged) == []
    assert divergences("PUT", f"{PULL}/merge", 200, merged | {"merge_sha": "x"})[0].endswith("('merge_sha' was unexpected)")
    assert "'merged' is a required property" in divergences("PUT", f"{PULL}/merge", 200, {"sha": "x", "message": "m"})[0]
    assert "not a status GitHub documents" in divergences("PUT", f"{PULL}/merge", 400, {"message": "m"})[0]
    assert divergences("PUT", f"{PULL}/merge", 401, {"message": "Bad credentials"}) == []  # any endpoint may say 401
    assert (
        "'documentation_url' is a required property"
        in divergences("POST", "/repos/acme/kb/pulls", 422, {"message": "Validation Failed"})[0]
    )
    assert "no operation" in divergences("DELETE", f"{PULL}/merge", 204, None)[0]
    status = {"state": None, "statuses": [], "sha": "a", "total_count": 0, "commit_url": "u", "url": "u"}
    found = divergences("GET", "/repos/acme/kb/commits/abc/status", 200, status)
    assert any("/state: None is not of type 'string'" in d for d in found) and any(
        "'repository' is a required property" in d for d in found
    )


def test_a_double_answering_a_wrong_shape_fails_the_test_using_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    double = GitHubDouble(tmp_path / "github").start()
    double.add_token("tok", "kb-proposer")
    sha = "b" * 40
    double.add_check_run(sha, "kb-check")
    right = double._check_run

    def wrong(head: str, run: dict[str, Any]) -> dict[str, Any]:  # a conclusion GitHub has no word for
        return right(head, run) | {"conclusion": "passed"}

    monkeypatch.setattr(double, "_check_run", wrong)
    answer = double.api("GET", f"/repos/acme/kb/commits/{sha}/check-runs", {}, {}, "tok")
    assert answer.status == 200  # the client sees the answer; the test fails when the double stops
    with pytest.raises(AssertionError, match=r"checks/list-for-ref .* at /check_runs/0/conclusion: 'passed' is not one of"):
        double.stop()
