"""The consolidation Proposer: it writes a batch's job results through the branch's backend,
one commit per job, like any Proposer writes through its ``WriteBackend``.

The jobs decide what is written (``pipeline.consolidate.plan.run_jobs``), asking the configured model
(``pipeline.consolidate.model``) what they cannot decide offline; the Proposer's identity is that
model's when one is configured (so the Reviewer must be of another family). What the jobs found
and did is returned as the run's transcript.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agents.backend import WriteBackend
from agents.protocols import AgentIdentity, ProposalTask, ProposerOutcome
from pipeline.consolidate.result import JobResult

CONSOLIDATION_PROPOSER = AgentIdentity("kb-offline/consolidate", "kb-consolidate")


@dataclass
class ConsolidationProposer:
    jobs: list[tuple[str, JobResult]]
    checkpoint: Callable[[str], None]  # commits what the job wrote, with the proposal's trailers
    identity: AgentIdentity = CONSOLIDATION_PROPOSER

    def propose(self, task: ProposalTask, backend: WriteBackend) -> ProposerOutcome:
        done = []
        for name, result in self.jobs:
            if not result.changes:
                continue
            for path, text in sorted(result.changes.items()):
                if path.startswith(task.write_prefixes):
                    backend.write_page(path, text)
            fixed = [f for f in result.found if f.fixed]
            lines = "\n".join(f"- {f.path}: {f.detail}" for f in fixed[:20])
            self.checkpoint(f"Consolidate ({name}): {len(result.changes)} page(s), {len(fixed)} fix(es)\n\n{lines}")
            done.append({"job": name, "pages": sorted(result.changes), "found": [f.detail for f in result.found]})
        return ProposerOutcome(transcript={"agent": self.identity.model, "jobs": done})
