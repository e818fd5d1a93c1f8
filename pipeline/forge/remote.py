"""Git pushes and fetches to the forge's repository, apart from its API (the ``git`` binary).

A token goes to git as an HTTP header through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n`` (git 2.31+),
never on the command line (where ``ps`` shows it) and never in ``.git/config``. The remote is the
one named in ``forge.remote`` (``origin`` by default), as ``git clone`` left it.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kb.errors import ForgeError

NOTES_REFS = ("refs/notes/kb-reviews",)


@dataclass(frozen=True)
class GitRemote:
    root: Path
    name: str
    token: str | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["GIT_TERMINAL_PROMPT"] = "0"
        if self.token:
            basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
            count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
            env.update(
                {
                    "GIT_CONFIG_COUNT": str(count + 1),
                    f"GIT_CONFIG_KEY_{count}": "http.extraHeader",
                    f"GIT_CONFIG_VALUE_{count}": f"Authorization: Basic {basic}",
                }
            )
        return env

    def _git(self, *args: str, what: str) -> str:
        git = shutil.which("git")
        if git is None:
            raise ForgeError("the git binary is not on PATH; pushes and fetches to the forge need it", hint="install git 2.31 or newer")
        done = subprocess.run([git, "-C", str(self.root), *args], env=self._env(), capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            detail = next((line for line in lines if line.startswith(("fatal:", "error:", " ! "))), lines[-1] if lines else "")
            said = [line.removeprefix("remote:").strip() for line in lines if line.startswith("remote: error:")]
            detail = " ".join(said) or detail  # the forge's own words (a protected branch's refusal)
            raise ForgeError(
                f"git {what} to remote {self.name!r} failed: {detail.strip()}",
                hint=f"check `git remote get-url {self.name}` and that the token may push to it",
            )
        return done.stdout

    def url(self) -> str:
        return self._git("remote", "get-url", self.name, what="remote lookup").strip()

    def push_branch(self, branch: str, force: bool = True) -> None:
        """Publish a work branch (forced: a re-proposal rewrites it; the PR follows its head)."""
        self._git(
            "push", "--porcelain", self.name, f"{'+' if force else ''}refs/heads/{branch}:refs/heads/{branch}", what=f"push of {branch}"
        )

    def push_ref(self, ref: str) -> None:
        """Publish a ref outside ``refs/heads`` (``refs/kb/consolidation``), fast-forward only."""
        self._git("push", "--porcelain", self.name, f"{ref}:{ref}", what=f"push of {ref}")

    def fetch_ref_if_any(self, ref: str) -> bool:
        """Fetch ``ref`` into the same local ref (forced) when the remote has it; False when not."""
        if not self._git("ls-remote", self.name, ref, what=f"lookup of {ref}").strip():
            return False
        self.fetch_ref(ref, ref)
        return True

    def delete_branch(self, branch: str) -> None:
        self._git("push", "--porcelain", self.name, f":refs/heads/{branch}", what=f"deletion of {branch}")

    def fetch_branch(self, branch: str, into: str) -> None:
        """Fetch ``branch`` of the remote into the local ref ``into`` (forced: it mirrors the remote)."""
        self._git("fetch", "--no-tags", self.name, f"+refs/heads/{branch}:{into}", what=f"fetch of {branch}")

    def fetch_ref(self, ref: str, into: str) -> None:
        """Fetch any ref of the remote (``refs/pull/N/head``: a pull request's head, also from a fork)
        into the local ref ``into`` (forced)."""
        self._git("fetch", "--no-tags", self.name, f"+{ref}:{into}", what=f"fetch of {ref}")

    def push_notes(self) -> None:
        """Publish the review notes; a remote that moved is merged into first (notes of other heads)."""
        for ref in NOTES_REFS:
            try:
                self._git("push", "--porcelain", self.name, f"{ref}:{ref}", what=f"push of {ref}")
            except ForgeError:
                self.fetch_notes()
                self._git("push", "--porcelain", self.name, f"{ref}:{ref}", what=f"push of {ref}")

    def fetch_notes(self) -> None:
        """Bring the remote's review notes in, keeping local ones (``git notes merge -s union``)."""
        for ref in NOTES_REFS:
            remote_ref = f"refs/notes/remote-{ref.rsplit('/', 1)[-1]}"
            try:
                self._git("fetch", "--no-tags", self.name, f"+{ref}:{remote_ref}", what=f"fetch of {ref}")
            except ForgeError:
                continue  # the remote has no notes yet
            self._git("notes", f"--ref={ref}", "merge", "-s", "cat_sort_uniq", remote_ref, what="merge of review notes")
