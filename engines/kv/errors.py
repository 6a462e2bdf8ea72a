"""The two ways a KV allocator says no.

`KVCapacityError` means never: the request is larger than the whole cache (or than one
sequence may grow), so waiting cannot help and the caller must refuse it. `KVOutOfMemoryError`
means not now: free space will come back when other sequences finish, so a scheduler waits or
preempts. Allocators check before they change anything, so after either error their state is
exactly what it was.
"""

from __future__ import annotations


class KVCapacityError(ValueError):
    """The request can never fit in this KV cache, however long it waits."""


class KVOutOfMemoryError(RuntimeError):
    """The request does not fit in the KV memory free right now (wait, or preempt)."""
