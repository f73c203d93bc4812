"""How often the cyclic garbage collector runs a full collection during a long job.

A build holds hundreds of thousands of long-lived objects at once (loaded artifacts, binding
summaries, gate records, a package's response records). CPython's default pacing runs a full
collection each time the objects that survived grow by a quarter, and each one walks every
tracked object: on a 10,000-item rebuild that is about ten passes of a third of a second, a
fifth of its time. What a build frees, reference counting frees; cycles are rare. So during
the job full collections wait far longer (the young generations are still collected as usual),
and the default pacing returns when it ends.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

FULL_EVERY = 10_000  # young-generation passes between full collections (CPython's default: 10)


@contextmanager
def long_lived_heap(full_every: int = FULL_EVERY) -> Iterator[None]:
    """Space full collections ``full_every`` middle-generation passes apart inside the block."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], max(before[2], full_every))
    try:
        yield
    finally:
        gc.set_threshold(*before)
