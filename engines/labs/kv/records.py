"""The KV lab's frozen records: what one scenario step hands out, and their JSON form.

A `KVStepRecord` is the whole picture after one step: both allocators' `KVStats`, the paged
pool block by block (`KVPoolState`), the contiguous regions, every sequence's progress and
text, and what happened (admissions, prefix hits, copy-on-write, preemption, refusals). A
model with sliding-window layers keeps one block table per layer group: `KVGroupStep` per
group (blocks held against keeping every token, each sequence's table in it); the pool drawn
is the first group's (the full-attention layers', where the model has them).
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


@dataclass(frozen=True)
class KVGroupStep:
    """One layer group of the paged cache after a step (engines/kv/group_coordinator)."""

    name: str
    """"full attention" or "sliding window W"."""
    window: int
    n_layers: int
    blocks_held: int
    """Blocks the sequences' tables in this group hold (a shared block counted in each)."""
    blocks_full: int
    """Blocks they would hold keeping every token: ⌈tokens / block_size⌉ each."""
    bytes_per_block: int
    """block_size × this group's layers' K/V bytes per token."""
    seq_ids: tuple[str, ...]
    block_tables: tuple[tuple[int, ...], ...]
    """Per sequence in `seq_ids`, logical block 0 first; -1 where the window dropped it."""
    blocks_used: int = 0
    """Distinct blocks of the group's pool in use (a shared block once)."""

    @property
    def held_bytes(self) -> int:
        return self.blocks_held * self.bytes_per_block

    @property
    def full_bytes(self) -> int:
        return self.blocks_full * self.bytes_per_block

    def table(self, seq_id: str) -> tuple[int, ...]:
        """`seq_id`'s table in this group (empty when it holds none)."""
        return self.block_tables[self.seq_ids.index(seq_id)] if seq_id in self.seq_ids else ()


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
    groups: tuple[KVGroupStep, ...] = ()
    """Each layer group's blocks (a model with sliding-window layers), else empty."""
    kv_held_closed: float = 1.0
    """The closed form's held / kept-everything bytes over the running sequences' tokens
    (`roofline.kv_held`: every layer min(tokens, its window)); 1 without windows."""

    @property
    def held_bytes(self) -> int:
        """KV bytes the groups' tables hold (0 without groups)."""
        return sum(g.held_bytes for g in self.groups)

    @property
    def full_bytes(self) -> int:
        """What they would hold keeping every token in every layer."""
        return sum(g.full_bytes for g in self.groups)

    @property
    def used_bytes(self) -> int:
        """KV bytes of the blocks the groups' pools have in use (a shared block once)."""
        return sum(g.blocks_used * g.bytes_per_block for g in self.groups)

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
                       lambda v, w: tuple(read_int_array(v, w, -1, n - 1).tolist()),
                       f"{where}.block_tables", MAX_SEQS)
    if len(tables) != len(seq_ids):
        raise ValueError(f"{where}.block_tables: one table per sequence expected")
    free = read_int_array(d.get("free_queue", []), f"{where}.free_queue", 0, n - 1)
    return KVPoolState(block_size=block_size, seq_ids=seq_ids, block_tables=tuple(tables),
                       free_queue=free.astype(np.int32), **arrays)


GROUP_FIELDS = {"name": Setting("str", max_len=100), "window": _COUNT,
                "n_layers": Setting("int", 1), "blocks_held": _COUNT, "blocks_full": _COUNT,
                "bytes_per_block": _COUNT, "blocks_used": _COUNT,
                "seq_ids": lambda v, w: tuple(Setting("str-list", max_len=MAX_SEQS).check(v, w)),
                "block_tables": lambda v, w: tuple(read_list(
                    v, lambda t, tw: tuple(read_int_array(t, tw, -1, MAX_BLOCKS).tolist()), w,
                    MAX_SEQS))}


def group_to_dict(group: KVGroupStep) -> dict:
    d = asdict(group)
    d["seq_ids"], d["block_tables"] = list(group.seq_ids), [list(t) for t in group.block_tables]
    return d


def group_from_dict(d: dict, where: str) -> KVGroupStep:
    group = read_dataclass(KVGroupStep, d, where, GROUP_FIELDS)
    if len(group.block_tables) != len(group.seq_ids):
        raise ValueError(f"{where}.block_tables: one table per sequence expected")
    return group


def step_to_dict(rec: KVStepRecord, with_pool: bool = True) -> dict:
    out = {"step": rec.step, "paged": rec.paged.to_dict(), "contiguous": rec.contiguous.to_dict(),
           "pool": pool_to_dict(rec.pool) if with_pool and rec.pool is not None else None,
           "regions": [asdict(r) for r in rec.regions],
           "contiguous_free": [list(e) for e in rec.contiguous_free],
           "seqs": [asdict(s) for s in rec.seqs], "events": list(rec.events),
           "ran_model": rec.ran_model, "step_s": rec.step_s,
           "radix": rec.radix.to_dict() if with_pool and rec.radix is not None else None}
    if rec.groups:  # a model with layer groups (older snapshots have neither field)
        out["groups"] = [group_to_dict(g) for g in rec.groups]
        out["kv_held_closed"] = rec.kv_held_closed
    return out


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
    "groups": lambda v, w: tuple(read_list(v, group_from_dict, w, 64)),
    "kv_held_closed": Setting("float", 0, 1),
}


def step_from_dict(d: dict, where: str) -> KVStepRecord:
    f = read_fields(d, STEP_FIELDS, where, optional={
        "pool": None, "contiguous_free": (), "events": (), "ran_model": True, "step_s": 0.0,
        "radix": None, "groups": (), "kv_held_closed": 1.0})
    return KVStepRecord(**f)


def info_from_dict(d: dict, where: str) -> KVRunInfo:
    return read_dataclass(KVRunInfo, d, where, RUN_INFO_FIELDS)


def seq_info_from_dict(d: dict, where: str) -> SeqInfo:
    return read_dataclass(SeqInfo, d, where, SEQ_INFO_FIELDS)


def _need(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{where}: missing field {key!r}")
    return d[key]
