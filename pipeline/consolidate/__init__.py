"""`kb consolidate`: the periodic, whole-repository pass (docs/consolidation.md).

- ``view``: a commit's pages and evidence, read from git objects (what every job reads).
- ``jobs``: the offline jobs, pure functions from page texts to page texts and findings.
- ``proposer``: the consolidation Proposer, which writes a batch's jobs through the same
  ``WriteBackend`` as every other Proposer.
- ``record``: the cycle's plan and coverage record, committed under ``consolidation/``.
- ``cycle``: planning, batches, branches, review and merge, resume, status, ``--if-needed``.
"""
