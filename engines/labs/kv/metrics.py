"""A KV run's headline figures over its step records (the snapshot's metrics, `bench kv`'s
lab figures, the window's status line)."""

from __future__ import annotations


def kv_metrics(records) -> dict:
    """Headline figures of a run. Waste is each allocator's at its peak reservation (the step
    reserving the most slots; of those, the one holding the most tokens), as `bench kv`."""
    if not records:
        return {"steps": 0}

    def peak(side):
        return max((getattr(r, side) for r in records),
                   key=lambda s: (s.slots_reserved, s.slots_filled))

    paged, contiguous = peak("paged"), peak("contiguous")
    last = records[-1]
    events = [e for r in records for e in r.events]
    return {
        "steps": len(records),
        "model_steps": sum(1 for r in records if r.ran_model),
        "paged_waste_frac": paged.waste_frac,
        "contiguous_waste_frac": contiguous.waste_frac,
        "paged_peak_reserved_slots": paged.slots_reserved,
        "contiguous_peak_reserved_slots": contiguous.slots_reserved,
        "paged_max_concurrent_seqs": max(r.paged.n_seqs for r in records),
        "contiguous_max_concurrent_seqs": max(r.contiguous.n_seqs for r in records),
        "prefix_hit_rate": last.paged.prefix_hit_rate,
        "max_shared_blocks": max(r.paged.shared_blocks for r in records),
        "cow_copies": sum(1 for e in events if "copy-on-write" in e),
        "preemptions": sum(1 for e in events if " preempted (" in e),
        "refused": sum(1 for q in last.seqs if q.status == "refused"),
        "finished": sum(1 for q in last.seqs if q.status == "finished"),
        "evictions": last.paged.evictions,
        "model_s": sum(r.step_s for r in records),
    }
