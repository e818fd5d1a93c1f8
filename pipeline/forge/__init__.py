"""The forge layer (docs/github.md): where a work branch becomes a change that is reviewed and merged.

- ``base``: the narrow, domain-level interface (``Forge``), what a forge offers (``Capabilities``)
  and the data it speaks in;
- ``kinds``: the table of forges, ``forge.kind`` -> class (the one place that names them);
- ``local``: today's behaviour (branches, signed git notes, the local merge);
- ``github``: pull requests on GitHub through ``githubkit``;
- ``remote``: git push and fetch (the ``git`` binary), kept apart from the API;
- ``changes``: the jobs behind ``kb pr open|review|merge|list|status`` and ``kb sync``;
- ``run``: the steps of ``kb run`` on a forge (``pipeline.loop``'s seam), made of those jobs;
- ``body``: what a pull request says (evidence, pages, claims, gate) and its labels;
- ``workflows``: the GitHub Actions workflows ``kb github init`` writes, and which kb they install.
"""
