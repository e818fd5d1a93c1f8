"""The table of forges: each ``forge.kind`` of kb.config.yaml and the class that implements it.

This is the one place that knows forges by name. Each class says what it offers in its
``capabilities`` (``pipeline.forge.base.Capabilities``) and makes itself for a repository
(``for_repo``); the jobs ask the capabilities, never the name. A new forge (GitLab, Gitea) is a
module beside ``github.py`` implementing ``pipeline.forge.base.Forge``, one line here, and its name
in ``kb.config.ForgeKind`` (the config cannot import this table; a test keeps the two equal).
"""

from __future__ import annotations

from pipeline.forge.base import ForgeClass
from pipeline.forge.github import GitHubForge
from pipeline.forge.local import LocalForge

FORGES: dict[str, ForgeClass] = {
    "local": LocalForge,
    "github": GitHubForge,
}
