"""The KV lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_kv_section`'s records, per step: the paged pool's blocks held by a sequence
(`KVStats.blocks_used`) and the free blocks still caching a prefix ("cached, free"); and the KV slots each
allocator reserves (paged: blocks held × block size; contiguous: its regions), the
paged one solid and the contiguous one dashed.
"""

from __future__ import annotations

from inferlab.engines.labs.kv.records import KVSnapshot
from inferlab.engines.trace.overlay import Curve, Plot


def kv_plots(read: KVSnapshot) -> list[Plot]:
    """`read`: what read_kv_section returns. No plot before a run."""
    records = read.steps
    if read.run is None or not records:
        return []
    step = [r.step for r in records]

    def curve(name: str, values, dashed: bool = False) -> Curve:
        return Curve(name, step, values, steps=True, dashed=dashed)

    pool = Plot("Paged KV pool by step", "step", "blocks",
                (curve("blocks in use", [r.paged.blocks_used for r in records]),
                 curve("cached, free",
                       [r.paged.blocks_cached_free for r in records], dashed=True)))
    reserved = Plot("KV slots reserved by step", "step", "slots (tokens)",
                    (curve("paged", [r.paged.slots_reserved for r in records]),
                     curve("contiguous", [r.contiguous.slots_reserved for r in records],
                           dashed=True)))
    return [pool, reserved]
