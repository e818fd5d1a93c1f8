"""Allow ``python -m kb``."""

from kb.cli.app import main

main()
