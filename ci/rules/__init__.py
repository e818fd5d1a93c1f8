"""One module per rule family. Each exposes ``check(snapshot, selection) -> list[Finding]``."""
