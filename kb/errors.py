"""The one error family of kb: a message, a hint that names what to do, and an exit code.

Every user-facing failure is a ``KbError`` subclass; the CLI's single handler prints
``error: <message>`` and ``hint: <hint>`` and exits with the class's code. Anything else
that escapes is a bug: the handler writes a crash log and exits with ``EXIT_BUG``.
"""

from __future__ import annotations

EXIT_FINDINGS = 1  # kb check found errors; not an exception, a result
EXIT_BUG = 70


class KbError(Exception):
    """Base of all expected failures.

    ``path`` and ``line``, when given, say where the problem is: ``message`` (what the user
    sees) then starts with ``path:line:``, and ``detail`` is the problem alone. Callers that
    report the location themselves (the checks) read the fields, never the text.
    """

    exit_code = 2
    default_hint = ""
    details: tuple[str, ...] = ()  # further lines (one per finding, say), printed after the message

    def __init__(self, message: str, hint: str | None = None, *, path: str | None = None, line: int | None = None) -> None:
        where = "" if path is None else f"{path}:" if line is None else f"{path}:{line}:"
        self.detail = message
        self.path = path
        self.line = line
        self.message = f"{where} {message}" if where else message
        self.hint = hint if hint is not None else self.default_hint
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class UsageError(KbError):
    """Bad arguments: unknown option values, empty queries, malformed ranges."""

    exit_code = 2


class NotARepositoryError(KbError):
    exit_code = 3
    default_hint = "run `kb init PATH` to create one, or pass --repo PATH"


class ConfigError(KbError):
    exit_code = 4
    default_hint = "fix kb.config.yaml (see docs/config.md)"


class FormatError(KbError):
    """A file that cannot be parsed: malformed YAML/JSON, not UTF-8, unknown format."""

    exit_code = 5


class NotFoundError(KbError):
    """An unknown id, page, commit, branch or evidence line."""

    exit_code = 6


class PathError(KbError):
    """A path outside the repository or outside the folders a writer may touch."""

    exit_code = 7


class ConflictError(KbError):
    """The repository is in a state the command cannot act on: dirty, locked, exists."""

    exit_code = 8


class IndexMissingError(KbError):
    exit_code = 9
    default_hint = "run `kb index build`"


class ModelError(KbError):
    """A model call failed, returned invalid output, or no model is configured."""

    exit_code = 10


class GateError(KbError):
    """A merge refused by the gate: failing checks, missing or stale approval, an approval from the
    proposer's own family, a review note that does not match its schema (``MalformedReviewError``).
    The subclasses below are refusals of a review that cannot be trusted, each with its own code
    (docs/review.md, "Why a merge is refused")."""

    exit_code = 11


class MalformedReviewError(GateError):
    """A review note that is not valid JSON or does not match the review record's schema."""

    exit_code = 11
    default_hint = "remove the note (`git notes --ref kb-reviews remove COMMIT`) and run `kb review BRANCH` again"


class ReviewBlockedError(GateError):
    """The latest verdict of a reviewer on the exact head is request_changes."""

    exit_code = 13


class SignatureError(GateError):
    """A review that is not signed, whose signature does not verify, or whose signer is not an
    allowed signer of the repository; no signing key to review with; a branch that changes the
    allowed signers."""

    exit_code = 14
    default_hint = "review the branch again with `kb review BRANCH`, signing with an allowed key (`kb keygen`)"


class ReviewMismatchError(GateError):
    """A review note whose fields (head, branch, base, proposer, reviewer) do not match the commit
    and branch it annotates: a note copied from elsewhere or edited."""

    exit_code = 15


class ProvenanceError(GateError):
    """A work branch without the proposer's trailers (Kb-Proposer-Model, Kb-Proposer-Family)."""

    exit_code = 16
    default_hint = "propose the change with `kb propose` (or `kb run`), which records who proposed it"


class StaleApprovalError(GateError):
    """The change's head moved after the review that approved it: the approval is of an older
    commit (a push after the review; GitHub answers 409 to a merge given the reviewed head)."""

    exit_code = 11
    default_hint = "review the new head (`kb pr review N`), then merge; `kb run` does this itself"


class DeterministicReviewError(GateError):
    """The built-in deterministic Reviewer, run again at merge, does not approve the head."""

    exit_code = 17


class ForgeError(KbError):
    """The forge (GitHub) refused a request or could not be reached: a missing token, a wrong
    repository, missing permission, a moved head, a rule of the repository."""

    exit_code = 18


class MergeConflictError(ConflictError):
    """A change that no longer merges: the default branch moved and now conflicts with it."""

    exit_code = 8
    default_hint = "propose again from the new base (`kb run` re-proposes onto the same pull request by itself)"


class BudgetExceededError(KbError):
    exit_code = 12
