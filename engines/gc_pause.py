"""`gc_paused()`: CPython's cyclic collector held off while a bulk job makes millions of
long-lived objects (a trace's events, a simulated run's requests, sequences and records).

Each young collection walks every object made since the last one, and the objects such a job
keeps all survive: measured, the collector took half of a simulated Mooncake replay's wall time
and a sixth of a trace read. Nothing is lost: reference counting still frees whatever is not
in a cycle at once. At the end, what the job made is moved into the oldest generation
(`freeze` then `unfreeze`: two list splices, no walk), so the next young collection does not
walk it either; a cycle made meanwhile waits for the next full collection.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()
