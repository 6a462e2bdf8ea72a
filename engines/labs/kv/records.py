"""The KV lab's frozen records: what one scenario step hands out, and their JSON form.

A `KVStepRecord` is the whole picture after one step: both allocators' `KVStats`, the paged
pool block by block (`KVPoolState`), the contiguous regions, every sequence's progress and
text, and what happened (admissions, prefix hits, copy-on-write, preemption, refusals).
`SeqInfo` is what does not change over a sequence's life (its prompt, its colour).

`*_to_dict` / `*_from_dict` turn records into plain JSON values and back for snapshots;
readers raise ValueError naming the field that is missing or malformed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from inferlab.engines.fields import (
    Setting,
    read_dataclass,
    read_fields,
    read_int_array,
    read_list,
    shown,
)
from inferlab.engines.kv.pool_state import SHARED, KVPoolState
from inferlab.engines.kv.radix_state import RadixTreeState, radix_state_from_dict
from inferlab.engines.kv.stats import KVStats

# sequence status (paged side); the contiguous side uses the same words
WAITING = "waiting"
RUNNING = "running"
FINISHED = "finished"
REFUSED = "refused"
PREEMPTED = "preempted"
"""Waiting again after its blocks were taken back (it is recomputed on re-admission)."""
STALLED = "stalled"
"""Contiguous side only: admitted, but the model has not produced its next token yet."""


@dataclass(frozen=True)
class SeqInfo:
    """A sequence as the scenario defined it. Samples of one request share its prompt."""

    seq_id: str
    request_id: str
    color: int
    """Stable colour index (order of creation)."""
    user_text: str
    system_text: str
    prompt_tokens: int
    max_new_tokens: int
    temperature: float
    sample: int
    """0 for the request's first sequence, k for its k-th forked sample."""


@dataclass(frozen=True)
class SeqStep:
    """One sequence after one step."""

    seq_id: str
    status: str
    """waiting, running, finished, refused or preempted (paged side)."""
    contiguous_status: str
    """The same request on the contiguous allocator: waiting, running, stalled, finished, refused."""
    n_output: int
    """Tokens generated so far."""
    kv_tokens: int
    """Tokens with a reserved paged KV slot now (0 unless running)."""
    n_cached: int
    """Prompt tokens the prefix cache supplied at its (latest) admission."""
    output_text: str
    message: str = ""
    """Why it was refused, or what happened to it last."""


@dataclass(frozen=True)
class ContiguousRegion:
    seq_id: str
    start: int
    reserved: int
    filled: int


@dataclass(frozen=True, eq=False)
class KVStepRecord:
    step: int
    paged: KVStats
    contiguous: KVStats
    pool: KVPoolState | None
    """The paged pool after the step (None in a snapshot that kept only some steps' pools)."""
    regions: tuple[ContiguousRegion, ...]
    contiguous_free: tuple[tuple[int, int], ...]
    """Free (start, length) extents of the contiguous cache, in address order."""
    seqs: tuple[SeqStep, ...]
    events: tuple[str, ...]
    ran_model: bool
    """Whether the model ran this step (False while only the contiguous side catches up)."""
    step_s: float = 0.0
    """Wall time of the step (model forward included)."""
    radix: RadixTreeState | None = None
    """The radix prefix tree after the step (radix prefix caching only)."""

    def seq(self, seq_id: str) -> SeqStep | None:
        for s in self.seqs:
            if s.seq_id == seq_id:
                return s
        return None


@dataclass(frozen=True)
class KVRunInfo:
    """What a run is: the scenario, the model and the two allocators' sizes."""

    scenario: str
    scenario_title: str
    scenario_description: str
    model_id: str
    model_name: str
    device: str
    block_size: int
    n_blocks: int
    max_seq_len: int
    """Slots each contiguous region reserves."""
    bytes_per_slot: int


@dataclass(frozen=True)
class KVSnapshot:
    """A KV lab snapshot section as read (`read_kv_section`): what the window replays."""

    settings: dict
    """The lab's settings, checked against the table (engines/labs/kv/settings.py)."""
    run: KVRunInfo | None
    """None: the lab had not run when the snapshot was taken (no sequences, no steps)."""
    sequences: tuple[SeqInfo, ...]
    steps: tuple[KVStepRecord, ...]
    """In step order; each kept its pool state or not as the writer thinned them."""


# ---- JSON ------------------------------------------------------------------------------------
MAX_BLOCK_SIZE = 1024
MAX_BLOCKS = 1_000_000  # the lab's own ranges (engines/labs/kv/settings.py KV_SETTINGS)
MAX_SEQS = 100_000
_COUNT = Setting("int", 0)
_TEXT = Setting("str", max_len=100_000)

STATS_FIELDS = {f.name: _COUNT for f in fields(KVStats) if f.type == "int"}
SEQ_INFO_FIELDS = {"color": _COUNT, "prompt_tokens": _COUNT, "max_new_tokens": _COUNT,
                   "temperature": Setting("float", 0), "sample": _COUNT}
SEQ_STEP_FIELDS = {"n_output": _COUNT, "kv_tokens": _COUNT, "n_cached": _COUNT}
REGION_FIELDS = {"start": _COUNT, "reserved": _COUNT, "filled": _COUNT}
RUN_INFO_FIELDS = {"block_size": Setting("int", 1, MAX_BLOCK_SIZE),
                   "n_blocks": Setting("int", 1, MAX_BLOCKS), "max_seq_len": Setting("int", 1),
                   "bytes_per_slot": _COUNT}


def stats_from_dict(d: dict, where: str) -> KVStats:
    return read_dataclass(KVStats, d, where, STATS_FIELDS)


def pool_to_dict(pool: KVPoolState) -> dict:
    return {"block_size": pool.block_size, "seq_ids": list(pool.seq_ids),
            "state": pool.state.tolist(), "owner": pool.owner.tolist(),
            "ref_count": pool.ref_count.tolist(), "n_tokens": pool.n_tokens.tolist(),
            "block_tables": [list(t) for t in pool.block_tables],
            "free_queue": pool.free_queue.tolist()}


def pool_from_dict(d: dict, where: str) -> KVPoolState:
    """A pool read back: every block's state, owner (an index into seq_ids, -1 for none),
    ref count and fill within their ranges; block tables and the free queue name blocks
    that exist."""
    f = read_fields(d, {"block_size": Setting("int", 1, MAX_BLOCK_SIZE),
                        "seq_ids": Setting("str-list", max_len=MAX_SEQS)}, where)
    block_size, seq_ids = f["block_size"], tuple(f["seq_ids"])
    limits = {"state": (np.uint8, 0, SHARED), "owner": (np.int32, -1, len(seq_ids) - 1),
              "ref_count": (np.int32, 0, 2**31 - 1), "n_tokens": (np.int32, 0, block_size)}
    arrays = {}
    for key, (dtype, low, high) in limits.items():
        arr = read_int_array(_need(d, key, where), f"{where}.{key}", low, high, MAX_BLOCKS)
        if arrays and arr.shape[0] != arrays["state"].shape[0]:
            raise ValueError(f"{where}.{key}: expected {arrays['state'].shape[0]} integers, "
                             f"one per block")
        arrays[key] = arr.astype(dtype)
    n = arrays["state"].shape[0]
    tables = read_list(_need(d, "block_tables", where),
                       lambda v, w: tuple(read_int_array(v, w, 0, n - 1).tolist()),
                       f"{where}.block_tables", MAX_SEQS)
    if len(tables) != len(seq_ids):
        raise ValueError(f"{where}.block_tables: one table per sequence expected")
    free = read_int_array(d.get("free_queue", []), f"{where}.free_queue", 0, n - 1)
    return KVPoolState(block_size=block_size, seq_ids=seq_ids, block_tables=tuple(tables),
                       free_queue=free.astype(np.int32), **arrays)


def step_to_dict(rec: KVStepRecord, with_pool: bool = True) -> dict:
    return {"step": rec.step, "paged": rec.paged.to_dict(), "contiguous": rec.contiguous.to_dict(),
            "pool": pool_to_dict(rec.pool) if with_pool and rec.pool is not None else None,
            "regions": [asdict(r) for r in rec.regions],
            "contiguous_free": [list(e) for e in rec.contiguous_free],
            "seqs": [asdict(s) for s in rec.seqs], "events": list(rec.events),
            "ran_model": rec.ran_model, "step_s": rec.step_s,
            "radix": rec.radix.to_dict() if with_pool and rec.radix is not None else None}


def _extent(v, where: str) -> tuple[int, int]:
    if not (isinstance(v, list) and len(v) == 2):
        raise ValueError(f"{where}: expected [start, length], got {shown(v)}")
    return _COUNT(v[0], f"{where}[0]"), _COUNT(v[1], f"{where}[1]")


STEP_FIELDS = {
    "step": _COUNT, "paged": stats_from_dict, "contiguous": stats_from_dict,
    "pool": lambda v, w: pool_from_dict(v, w) if v else None,
    "regions": lambda v, w: tuple(read_list(v, lambda r, rw: read_dataclass(
        ContiguousRegion, r, rw, REGION_FIELDS), w, MAX_SEQS)),
    "contiguous_free": lambda v, w: tuple(read_list(v, _extent, w, MAX_BLOCKS)),
    "seqs": lambda v, w: tuple(read_list(v, lambda q, qw: read_dataclass(
        SeqStep, q, qw, SEQ_STEP_FIELDS), w, MAX_SEQS)),
    "events": lambda v, w: tuple(Setting("str-list", max_len=100_000).check(v, w)),
    "ran_model": Setting("bool"), "step_s": Setting("float", 0),
    "radix": lambda v, w: radix_state_from_dict(v, w) if v is not None else None,
}


def step_from_dict(d: dict, where: str) -> KVStepRecord:
    f = read_fields(d, STEP_FIELDS, where, optional={
        "pool": None, "contiguous_free": (), "events": (), "ran_model": True, "step_s": 0.0,
        "radix": None})
    return KVStepRecord(**f)


def info_from_dict(d: dict, where: str) -> KVRunInfo:
    return read_dataclass(KVRunInfo, d, where, RUN_INFO_FIELDS)


def seq_info_from_dict(d: dict, where: str) -> SeqInfo:
    return read_dataclass(SeqInfo, d, where, SEQ_INFO_FIELDS)


def _need(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{where}: missing field {key!r}")
    return d[key]
