"""The KV lab's snapshot section (`labs.kv`): `kv_section` writes the settings, what the run is
(KVRunInfo), every sequence (SeqInfo) and the step records; `read_kv_section` reads it back
strictly into a `KVSnapshot` (ValueError naming the field).

Each step keeps its pool state while n_blocks × steps stays under KV_POOL_CELLS_LIMIT; past
that only every k-th step's (and the last) is kept."""

from __future__ import annotations

from dataclasses import asdict

from inferlab.engines.fields import read_list, read_object
from inferlab.engines.labs.kv.metrics import kv_metrics
from inferlab.engines.labs.kv.records import (
    MAX_SEQS,
    KVSnapshot,
    info_from_dict,
    seq_info_from_dict,
    step_from_dict,
    step_to_dict,
)
from inferlab.engines.labs.kv.settings import check_kv_settings
from inferlab.engines.trace.snapshot import lab_section as section
from inferlab.engines.trace.snapshot import section_field
from inferlab.engines.trace.thinning import keep_every

KV_POOL_CELLS_LIMIT = 400_000


def kv_section(settings: dict, info, seq_infos, records) -> dict:
    """`info`: KVRunInfo (None before any run); `seq_infos`: SeqInfo; `records`: KVStepRecord."""
    if info is None:
        return section(settings, {}, {"steps": 0})
    n = max(len(records), 1)
    every = keep_every(n, info.n_blocks, KV_POOL_CELLS_LIMIT)
    steps = [step_to_dict(r, with_pool=(i % every == 0 or i == len(records) - 1))
             for i, r in enumerate(records)]
    state = {"run": asdict(info), "sequences": [asdict(s) for s in seq_infos], "steps": steps,
             "pool_every": every}
    return section(settings, state, kv_metrics(records))


def read_kv_section(sec: dict) -> KVSnapshot:
    """The section as a `KVSnapshot`; ValueError names a bad field."""
    read_object(sec, "labs.kv")
    settings = check_kv_settings(section_field(sec, "settings", "labs.kv"), "labs.kv.settings")
    state = read_object(section_field(sec, "state", "labs.kv"), "labs.kv.state")
    if not state:
        return KVSnapshot(settings, None, (), ())
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
    return KVSnapshot(settings, info, tuple(seq_infos), tuple(records))
