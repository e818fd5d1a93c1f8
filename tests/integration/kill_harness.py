"""Kill-and-resume trials (issue 10, acceptance): a ``kb`` command in its own process is killed
with SIGKILL after a random delay, then the next command runs without any manual step. A trial
passes when nothing the killed command reported as added is lost, the next command succeeds,
and the repository checks clean (checks green, working tree clean, only merges and evidence adds
on main, the ledger chain intact).

Used by ``tests/integration/test_kill_resume.py`` (a few trials) and ``bench/kill_trials.py``
(many). Each scenario prepares a template repository once; every trial works on a copy.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ci.run import run_checks
from kb.cli.app import main
from kb.evidence import load_ledger, verify_chain
from kb.repo import Repo
from kb.scaffold import init_repository
from kb.scopes import user_scope
from tests.builders import SAMPLES, add_file
from tests.integration.processes import finish, main_line, start_kb, unreviewed_on_main

ADDED_RE = re.compile(r"^added (ev-[0-9a-f]{16}) ", re.M)


@dataclass
class Trial:
    scenario: str
    delay: float
    killed: bool  # still running when the signal came (else it had finished)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def run_kb(*args: str) -> tuple[int, str, str]:
    """``kb *args`` in this process (the next command after a kill), with its exit code and output."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def clean_problems(root: Path) -> list[str]:
    """What is wrong with the repository at ``root`` after the next command (empty: clean)."""
    repo = Repo(root)
    problems = []
    if repo.dirty_paths():
        problems.append(f"working tree not clean: {repo.dirty_paths()[:3]}")
    if unreviewed_on_main(root):
        problems.append(f"unreviewed commits on main: {unreviewed_on_main(root)}")
    if verify_chain(load_ledger(root)):
        problems.append("the ledger chain does not verify")
    report = run_checks(repo)
    if not report.ok:
        problems.append(f"kb check: {[f.message for f in report.findings][:3]}")
    return problems


@dataclass(frozen=True)
class Outcome:
    """A trial's repository, the template's facts, what the killed command printed, and the
    exit code and output of the next command."""

    root: Path
    facts: dict[str, str]
    killed_out: str
    after: tuple[int, str, str]


@dataclass
class Scenario:
    """One command to kill: ``prepare`` makes the template (and returns facts: ``args`` is the
    command after ``--repo ROOT``, lines apart), the killed command is run again as the next one,
    ``verify`` is the trial's own checks beyond ``clean_problems``."""

    name: str
    prepare: Callable[[Path, Path], dict[str, str]]  # (template root, inputs folder) -> facts
    verify: Callable[[Outcome], list[str]]

    def args(self, root: Path, facts: dict[str, str]) -> list[str]:
        return ["--repo", str(root), *facts["args"].split("\n")]


# ---- evidence add ----------------------------------------------------------------------------


def _prepare_add(root: Path, inputs: Path) -> dict[str, str]:
    init_repository(root)
    names = []
    for n in range(3):
        note = inputs / f"note-{n}.md"
        note.write_text(f"# Note {n}\n\nA note added by the kill trials, number {n}.\n")
        names.append(str(note))
    return {"args": "\n".join(["evidence", "add", *names]), "sources": "\n".join(sorted(Path(n).name for n in names))}


def _verify_add(run: Outcome) -> list[str]:
    entries = load_ledger(run.root)
    problems = []
    if run.after[0] != 0:
        problems.append(f"the next add exited {run.after[0]}: {run.after[2].strip()}")
    if "\n".join(sorted(e.source for e in entries)) != run.facts["sources"]:
        problems.append(f"ledger holds {[e.source for e in entries]}")
    lost = set(ADDED_RE.findall(run.killed_out)) - {e.id for e in entries}
    if lost:
        problems.append(f"reported as added, then lost: {sorted(lost)}")
    return problems


# ---- memory ingest ---------------------------------------------------------------------------


def _prepare_ingest(root: Path, inputs: Path) -> dict[str, str]:
    init_repository(root)
    names = []
    for name in ("alice-2025-03-02.json", "alice-2025-06-18.json"):
        shutil.copy(SAMPLES / name, inputs / name)
        names.append(str(inputs / name))
    return {"args": "\n".join(["memory", "ingest", "--user", "alice", *names, "--no-index"])}


def _verify_ingest(run: Outcome) -> list[str]:
    root = run.root
    problems = []
    if run.after[0] != 0:
        problems.append(f"the next ingest exited {run.after[0]}: {run.after[2].strip()}")
    sessions = [e for e in load_ledger(root) if e.scope == user_scope("alice")]
    if len(sessions) != 2:
        problems.append(f"{len(sessions)} of 2 sessions stored")
    if not (root / "users" / "alice" / "profile.md").is_file():
        problems.append("alice's memory (users/alice/profile.md) is missing after the next ingest")
    if [b for b in Repo(root).git.branches.local if b.startswith("kb/")]:
        problems.append("a work branch was left behind")
    return problems


# ---- merge -----------------------------------------------------------------------------------


def _prepare_merge(root: Path, _inputs: Path) -> dict[str, str]:
    from pipeline.propose import propose
    from pipeline.review import review_branch
    from pipeline.workspace import remove_workspace

    repo = init_repository(root)
    add_file(repo, "travel-policy.md", "document")
    add_file(repo, "alice-2025-03-02.json", "conversation", "alice")
    branch = propose(repo).branch
    if review_branch(repo, branch).verdict != "approve":
        raise AssertionError("the offline reviewer did not approve the sample proposal")
    remove_workspace(repo, branch)  # a worktree names absolute paths: each copy makes its own
    return {"args": "\n".join(["merge", branch, "--no-index"]), "branch": branch}


def _verify_merge(run: Outcome) -> list[str]:
    root, branch = run.root, run.facts["branch"]
    problems = []
    if run.after[0] != 0 or branch not in run.after[1]:
        problems.append(f"the next merge exited {run.after[0]}: {run.after[2].strip()}")
    if main_line(root).count(f"Merge {branch}") != 1:
        problems.append(f"main holds {main_line(root).count(f'Merge {branch}')} merges of {branch}")
    repo = Repo(root)
    if branch in repo.git.branches.local or repo.git.list_worktrees():
        problems.append("the merged branch or its worktree was left behind")
    return problems


# ---- index build -----------------------------------------------------------------------------


NEW_NOTE = "Quokkas are small marsupials that live on Rottnest Island."


def _prepare_index(root: Path, inputs: Path) -> dict[str, str]:
    from pipeline.loop import run_loop

    repo = init_repository(root)
    add_file(repo, "travel-policy.md", "document")
    run_loop(repo, build_index=True)  # an index serving this commit
    note = inputs / "quokka.md"
    note.write_text(f"# Quokkas\n\n{NEW_NOTE}\n")
    if run_kb("--repo", str(root), "evidence", "add", str(note))[0] != 0:
        raise AssertionError("could not add the note")
    return {"args": "index\nbuild"}


def _verify_index(run: Outcome) -> list[str]:
    root = run.root
    problems = []
    if run.after[0] != 0:
        problems.append(f"the next build exited {run.after[0]}: {run.after[2].strip()}")
    code, out, err = run_kb("--repo", str(root), "index", "status", "--json")
    head = str(Repo(root).head().id)
    if code != 0 or head not in out:
        problems.append(f"the index does not serve HEAD after the next build: {out.strip()[:200]} {err.strip()}")
    code, out, _ = run_kb("--repo", str(root), "search", "quokkas marsupials", "--include-evidence")
    if code != 0 or "Quokkas" not in out:
        problems.append(f"search does not find the new note: {out.strip()[:200]}")
    return problems


def _serving_before(root: Path) -> list[str]:
    """Between the kill and the next build: some index still serves, and search answers."""
    code, out, err = run_kb("--repo", str(root), "search", "travel desk")
    return [] if code == 0 and "travel" in out.lower() else [f"no index served after the kill: {err.strip()}"]


SCENARIOS = {
    "evidence add": Scenario("evidence add", _prepare_add, _verify_add),
    "memory ingest": Scenario("memory ingest", _prepare_ingest, _verify_ingest),
    "merge": Scenario("merge", _prepare_merge, _verify_merge),
    "index build": Scenario("index build", _prepare_index, _verify_index),
}


@dataclass
class Template:
    scenario: Scenario
    root: Path
    facts: dict[str, str]
    duration: float  # of one uninterrupted run of the command, in its own process


def make_template(scenario: Scenario, folder: Path) -> Template:
    """The scenario's template repository, and how long its command takes uninterrupted (one
    run on a copy, which must succeed and leave a clean repository)."""
    inputs = folder / "inputs"
    inputs.mkdir(parents=True)
    root = folder / "template"
    facts = scenario.prepare(root, inputs)
    probe = folder / "probe"
    shutil.copytree(root, probe, symlinks=True)
    started = time.monotonic()
    code, out, err = finish(start_kb(*scenario.args(probe, facts), cwd=folder))
    duration = time.monotonic() - started
    if code != 0:
        raise AssertionError(f"{scenario.name} failed without a kill ({code}): {err}")
    return Template(scenario, root, facts, duration)


def kill_trial(template: Template, folder: Path, rng: random.Random) -> Trial:
    """Copy the template, start the command, SIGKILL it after a random delay (up to a little
    past its usual duration, from when it has imported and starts writing), run it again and
    check the repository."""
    scenario = template.scenario
    root = folder / "repo"
    shutil.copytree(template.root, root, symlinks=True)
    delay = rng.uniform(0.3, 1.05) * template.duration
    process = start_kb(*scenario.args(root, template.facts), cwd=folder)
    time.sleep(delay)
    killed = process.poll() is None
    if killed:
        process.send_signal(signal.SIGKILL)
    _, killed_out, _ = finish(process)
    trial = Trial(scenario.name, round(delay, 3), killed)
    if scenario.name == "index build":
        trial.problems += _serving_before(root)
    if scenario.name.startswith("forget") and not _untouched(root, template.facts["head"]):
        seen = forget_visible(root, template.facts["evidence"].split("\n"))
        trial.problems += [f"after the kill alice's material is returned by {seen}"] if seen else []
    after = run_kb(*scenario.args(root, template.facts))
    trial.problems += scenario.verify(Outcome(root, template.facts, killed_out, after))
    trial.problems += clean_problems(root)
    return trial


# ---- forget --user ---------------------------------------------------------------------------
# (the material of every forget scenario is ALICE_MARK: it must be returned by no read from the
# moment the deny entry is written, and be in no git object or file under .kb/ after the re-run)


ALICE_SAYS = "I take cello lessons with Madame Girardot-Pons on Tuesdays."
ALICE_MARK = "Girardot-Pons"


def _prepare_forget(root: Path, inputs: Path) -> dict[str, str]:
    from pipeline.memory import ingest
    from tests.builders import write_chat

    repo = init_repository(root)
    add_file(repo, "travel-policy.md", "document")
    ingest(repo, "alice", [write_chat(inputs / "a.json", [("user", ALICE_SAYS)], "2024-03-01T10:00:00Z")])
    ingest(repo, "bob", [write_chat(inputs / "b.json", [("user", "I live in Oslo and drive a Volvo.")], "2024-05-05T08:00:00Z")])
    alice = [e.id for e in load_ledger(root) if e.scope == user_scope("alice")]
    return {"args": "forget\n--user\nalice", "evidence": "\n".join(alice), "head": str(repo.head().id)}


def forget_visible(root: Path, evidence: list[str]) -> list[str]:
    """Where alice's material is still returned: search (pages and evidence), read, grep,
    evidence show (empty: hidden everywhere)."""
    seen = []
    code, out, _ = run_kb("--repo", str(root), "search", "cello lessons Tuesdays", "--as", "user:alice", "--include-evidence")
    if ALICE_MARK in out:
        seen.append("search")
    code, out, _ = run_kb("--repo", str(root), "read", "users/alice/profile", "--as", "user:alice", "--level", "L2")
    if code == 0 and ALICE_MARK in out:
        seen.append("read")
    code, out, _ = run_kb("--repo", str(root), "grep", ALICE_MARK, "--as", "user:alice")
    if ALICE_MARK in out:
        seen.append("grep")
    for ident in evidence:
        code, out, _ = run_kb("--repo", str(root), "evidence", "show", ident)
        if ALICE_MARK in out:
            seen.append(f"evidence show {ident}")
    return seen


def _untouched(root: Path, head: str) -> bool:
    """Whether the killed forget changed nothing yet (killed before it wrote its deny entry)."""
    return not (root / ".kb" / "forget" / "denied.json").exists() and str(Repo(root).head().id) == head


def _verify_forget(run: Outcome) -> list[str]:
    root = run.root
    problems = []
    if run.after[0] != 0 or "verification: clean" not in run.after[1]:
        problems.append(f"the next forget exited {run.after[0]}: {run.after[1].strip()[-300:]} {run.after[2].strip()}")
    if seen := forget_visible(root, run.facts["evidence"].split("\n")):
        problems.append(f"alice's material returned after the next forget by {seen}")
    code, out, err = run_kb("--repo", str(root), "forget", "--verify")
    if code != 0:
        problems.append(f"kb forget --verify exited {code}: {out.strip()} {err.strip()}")
    if ALICE_MARK.encode() in _every_byte(root):
        problems.append(f"{ALICE_MARK!r} is still in a git object or under .kb/")
    code, out, _ = run_kb("--repo", str(root), "search", "Oslo Volvo", "--as", "user:bob")
    if "users/bob" not in out:
        problems.append(f"bob's memory is not found after the forget: {out.strip()[:200]}")
    return problems


def _every_byte(root: Path) -> bytes:
    import subprocess

    objects = subprocess.run(["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True)
    state = root / ".kb"
    return objects.stdout + b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file() and "forget" not in p.parts)


SCENARIOS["forget"] = Scenario("forget", _prepare_forget, _verify_forget)


# ---- forget one evidence item, forget --match -------------------------------------------------

ALICE_KEEPS = "I prefer aisle seats on long train rides."


def _prepare_two_sessions(root: Path, inputs: Path) -> tuple[str, str]:
    """Alice said two things in two sessions (one is forgotten, one stays); bob one. Returns the
    evidence id of the session to forget and HEAD."""
    from pipeline.memory import ingest
    from tests.builders import write_chat

    repo = init_repository(root)
    add_file(repo, "travel-policy.md", "document")
    sessions = [
        write_chat(inputs / "a1.json", [("user", ALICE_SAYS)], "2024-03-01T10:00:00Z"),
        write_chat(inputs / "a2.json", [("user", ALICE_KEEPS)], "2024-03-02T10:00:00Z"),
    ]
    ingest(repo, "alice", sessions)
    ingest(repo, "bob", [write_chat(inputs / "b.json", [("user", "I live in Oslo and drive a Volvo.")], "2024-05-05T08:00:00Z")])
    item = next(e.id for e in load_ledger(root) if e.path and ALICE_MARK in (root / e.path).read_text(encoding="utf-8"))
    return item, str(repo.head().id)


def _prepare_forget_item(root: Path, inputs: Path) -> dict[str, str]:
    item, head = _prepare_two_sessions(root, inputs)
    return {"args": f"forget\n{item}", "evidence": item, "head": head}


def _prepare_forget_match(root: Path, inputs: Path) -> dict[str, str]:
    item, head = _prepare_two_sessions(root, inputs)
    return {"args": "forget\n--match\nMadame Girardot-Pons", "evidence": item, "head": head}


def _verify_forget_part(run: Outcome) -> list[str]:
    """As ``_verify_forget``, and alice's other session is still hers and found."""
    problems = _verify_forget(run)
    code, out, _ = run_kb("--repo", str(run.root), "search", "aisle seats train rides", "--as", "user:alice", "--include-evidence")
    if "aisle seats" not in out:
        problems.append(f"alice's other session is not found after the forget: {out.strip()[:200]}")
    return problems


SCENARIOS["forget item"] = Scenario("forget item", _prepare_forget_item, _verify_forget_part)
SCENARIOS["forget match"] = Scenario("forget match", _prepare_forget_match, _verify_forget_part)
