"""The KV lab's snapshot section, headline metrics, headless run and trace events."""

from __future__ import annotations

from dataclasses import asdict

from inferlab.engines import kernels
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.kv.block_manager import PREFIX_CACHES
from inferlab.engines.kv.radix_cache import EVICTION_POLICIES
from inferlab.engines.labs.kv.scenarios import SCENARIO_NAMES
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.fields import Setting, check_settings, read_list, read_object
from inferlab.engines.trace.snapshot import lab_section as section
from inferlab.engines.trace.snapshot import section_field
from inferlab.engines.trace.thinning import keep_every

# The KV lab's run: settings, what the run is (KVRunInfo), every sequence (SeqInfo) and the
# per-step records. Each step keeps its pool state while n_blocks × steps stays under
# KV_POOL_CELLS_LIMIT; past that only every k-th step's (and the last) is kept.
KV_DEFAULTS = {"scenario": "shared-prompt", "model": "auto", "block_size": 16, "n_blocks": 0,
               "kv_dtype": "model", "kernels": "auto", "prefix_cache": "hash",
               "eviction_policy": "lru"}
KV_DTYPES = ("model", "int8", "fp8-e4m3")
"""What the pool stores: the model's own dtype, or INT8 / FP8 E4M3 codes with one fp32 scale
per token and head (engines.quant.kv_quant; attention dequantizes on read)."""
KV_POOL_CELLS_LIMIT = 400_000
KV_SETTINGS = {  # the view's ranges
    "scenario": Setting("str", choices=SCENARIO_NAMES),
    "model": Setting("str"),
    "block_size": Setting("int", 1, 1024),
    "n_blocks": Setting("int", 0, 1_000_000),
    "kv_dtype": Setting("str", choices=KV_DTYPES),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "prefix_cache": Setting("str", choices=PREFIX_CACHES),
    "eviction_policy": Setting("str", choices=EVICTION_POLICIES),
}


def kv_lab_model(settings: dict, device: str = "cpu"):
    """(model, tokenizer) the KV lab runs: the settings' model on their kernel path, its
    cache at `kv_dtype`."""
    with kernels.chosen(settings.get("kernels", "auto")):
        model, tokenizer = load_lab_model(settings["model"], device)
    if settings.get("kv_dtype", "model") != "model":
        # here, not at the top: every command imports this section at start-up (the
        # registry); the quantized pool's module loads only when a run asks for it
        from inferlab.engines.quant.kv_quant import kv_quantized

        model = kv_quantized(model, settings["kv_dtype"])
    return model, tokenizer


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


def kv_section(settings: dict, info, seq_infos, records) -> dict:
    """`info`: KVRunInfo (None before any run); `seq_infos`: SeqInfo; `records`: KVStepRecord."""
    from inferlab.engines.labs.kv.records import step_to_dict  # here: start-up, as above

    if info is None:
        return section(settings, {}, {"steps": 0})
    n = max(len(records), 1)
    every = keep_every(n, info.n_blocks, KV_POOL_CELLS_LIMIT)
    steps = [step_to_dict(r, with_pool=(i % every == 0 or i == len(records) - 1))
             for i, r in enumerate(records)]
    state = {"run": asdict(info), "sequences": [asdict(s) for s in seq_infos], "steps": steps,
             "pool_every": every}
    return section(settings, state, kv_metrics(records))


def read_kv_section(sec: dict):
    """(settings, KVRunInfo or None, [SeqInfo], [KVStepRecord]); ValueError names a bad field."""
    from inferlab.engines.labs.kv.records import (  # here: start-up, as above
        MAX_SEQS,
        info_from_dict,
        seq_info_from_dict,
        step_from_dict,
    )

    read_object(sec, "labs.kv")
    settings = check_settings(section_field(sec, "settings", "labs.kv"), KV_SETTINGS, KV_DEFAULTS,
                              "labs.kv.settings")
    state = read_object(section_field(sec, "state", "labs.kv"), "labs.kv.state")
    if not state:
        return settings, None, [], []
    info = info_from_dict(section_field(state, "run", "labs.kv.state"), "labs.kv.state.run")
    seq_infos = read_list(section_field(state, "sequences", "labs.kv.state"), seq_info_from_dict,
                          "labs.kv.state.sequences", MAX_SEQS)
    records = read_list(section_field(state, "steps", "labs.kv.state"), step_from_dict,
                        "labs.kv.state.steps", 1_000_000)
    for i, rec in enumerate(records):
        pool = rec.pool
        if pool is not None and (pool.n_blocks, pool.block_size) != (info.n_blocks,
                                                                      info.block_size):
            raise ValueError(f"labs.kv.state.steps[{i}].pool: {pool.n_blocks} blocks of "
                             f"{pool.block_size} tokens, the run has {info.n_blocks} of "
                             f"{info.block_size}")
    return settings, info, seq_infos, records


def kv_session(settings: dict, model, tokenizer):
    """The KV lab's session on `model` for `settings` (the run's and the window's alike)."""
    from inferlab.engines.labs.kv.session import KVLabSession  # here: start-up, as above

    return KVLabSession(model, tokenizer, settings["scenario"],
                        block_size=int(settings["block_size"]),
                        n_blocks=int(settings["n_blocks"]) or None,
                        prefix_cache=settings.get("prefix_cache", "hash"),
                        eviction_policy=settings.get("eviction_policy", "lru"))


def kv_run(settings: dict, device: str = "cpu", max_steps: int | None = None,
           on_step=None):
    """Run a KV lab scenario to its end headless: (KVLabSession, records).

    `on_step(record)` is called after each step (progress, trace spans).
    """
    session = kv_session(settings, *kv_lab_model(settings, device))
    records = []
    while not session.done and (max_steps is None or len(records) < max_steps):
        records.append(session.step())
        if on_step is not None:
            on_step(records[-1])
    return session, records


def kv_trace_step(recorder, record, end_s: float | None = None) -> None:
    """One KV step as a span ("kv step N", ending now) plus counters of both allocators."""
    end = recorder.now_s() if end_s is None else end_s
    recorder.add_span(f"kv step {record.step}", end - record.step_s, end, cat="kv",
                      args={"ran_model": record.ran_model, "events": len(record.events)})
    p, c = record.paged, record.contiguous
    recorder.counter("kv reserved slots", {"paged": p.slots_reserved,
                                           "contiguous": c.slots_reserved}, ts_s=end, cat="kv")
    recorder.counter("kv waste %", {"paged": 100 * p.waste_frac,
                                    "contiguous": 100 * c.waste_frac}, ts_s=end, cat="kv")
