"""`kb consolidate`: the periodic, whole-repository pass (docs/consolidation.md).

- ``view``: a commit's pages and evidence, read from git objects (what every job reads).
- ``page_text``: a page's claim rows, sections and footnote labels, as the jobs find and rewrite them.
- ``result``: what a job returns (``JobResult``: pages rewritten, ``Found`` defects, claim actions).
- ``jobs`` (re-verification, links, retirement, L0s, indexes), ``dedupe``, ``conflicts``,
  ``structure`` (split, tiny pages, L1 outlines): the offline jobs, pure functions from page
  texts to page texts and findings; ``model``: what they ask the configured model.
- ``proposer``: the consolidation Proposer, which writes a batch's jobs through the same
  ``WriteBackend`` as every other Proposer.
- ``record``: the cycle's plan and coverage record (typed), committed under ``consolidation/``;
  ``coverage``: what a batch did to it.
- ``plan``: a cycle's batches and the jobs of a batch; ``cycle``: branches, review and merge,
  resume; ``status``: the run report, ``kb consolidate status``, ``--if-needed``.
"""
