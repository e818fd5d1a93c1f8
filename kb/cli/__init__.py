"""The ``kb`` command line: ``app`` assembles one module per command group (see docs/architecture.md)."""
