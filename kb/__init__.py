"""kb: a Git-backed Markdown knowledge base and user memory for AI agents.

The core package owns the on-disk formats (config, pages, evidence), repository access,
chunking, indexes and retrieval. The CLI in ``kb.cli`` is the composition root.
"""

__version__ = "0.1.0"
# The distribution's name (pyproject.toml): `kb` on PyPI is another project; the command, and the
# import packages kb, agents, pipeline and ci, keep their names.
DISTRIBUTION = "kb-git"
