"""The KV lab's frozen records: what one scenario step hands out, and their JSON form.

A `KVStepRecord` is the whole picture after one step: both allocators' `KVStats`, the paged
pool block by block (`KVPoolState`), the contiguous regions, every sequence's progress and
text, and what happened (admissions, prefix hits, copy-on-write, preemption, refusals).
`SeqInfo` is what does not change over a sequence's life (its prompt, its colour).

`*_to_dict` / `*_from_dict` turn records into plain JSON values and back for snapshots;
readers raise ValueError naming the field that is missing or malformed.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields

import numpy as np

from inferlab.engines.kv.pool_state import KVPoolState
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


# ---- JSON ------------------------------------------------------------------------------------
def _need(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise ValueError(f"{where}: missing field {key!r}")
    return d[key]


def _build(cls, d: dict, where: str):
    """A dataclass from the dict's fields of that name (extra keys ignored)."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected an object")
    kwargs = {}
    for f in fields(cls):
        if f.name in d:
            kwargs[f.name] = d[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ValueError(f"{where}: missing field {f.name!r}")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"{where}: {exc}") from None


def stats_from_dict(d: dict, where: str) -> KVStats:
    return _build(KVStats, d, where)


def pool_to_dict(pool: KVPoolState) -> dict:
    return {"block_size": pool.block_size, "seq_ids": list(pool.seq_ids),
            "state": pool.state.tolist(), "owner": pool.owner.tolist(),
            "ref_count": pool.ref_count.tolist(), "n_tokens": pool.n_tokens.tolist(),
            "block_tables": [list(t) for t in pool.block_tables],
            "free_queue": pool.free_queue.tolist()}


def pool_from_dict(d: dict, where: str) -> KVPoolState:
    arrays = {}
    n = None
    for key, dtype in (("state", np.uint8), ("owner", np.int32), ("ref_count", np.int32),
                       ("n_tokens", np.int32)):
        try:
            arr = np.asarray(_need(d, key, where), dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{where}.{key}: expected a list of integers") from None
        if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
            raise ValueError(f"{where}.{key}: expected {n if n is not None else 'n_blocks'} "
                             "integers")
        n = arr.shape[0]
        arrays[key] = arr
    seq_ids = tuple(_need(d, "seq_ids", where))
    tables = tuple(tuple(int(b) for b in t) for t in _need(d, "block_tables", where))
    if len(tables) != len(seq_ids):
        raise ValueError(f"{where}.block_tables: one table per sequence expected")
    if any(b < 0 or b >= n for t in tables for b in t):
        raise ValueError(f"{where}.block_tables: a block id outside 0..{n - 1}")
    return KVPoolState(block_size=int(_need(d, "block_size", where)), seq_ids=seq_ids,
                       block_tables=tables,
                       free_queue=np.asarray(d.get("free_queue", []), dtype=np.int32),
                       **arrays)


def step_to_dict(rec: KVStepRecord, with_pool: bool = True) -> dict:
    return {"step": rec.step, "paged": rec.paged.to_dict(), "contiguous": rec.contiguous.to_dict(),
            "pool": pool_to_dict(rec.pool) if with_pool and rec.pool is not None else None,
            "regions": [asdict(r) for r in rec.regions],
            "contiguous_free": [list(e) for e in rec.contiguous_free],
            "seqs": [asdict(s) for s in rec.seqs], "events": list(rec.events),
            "ran_model": rec.ran_model, "step_s": rec.step_s}


def step_from_dict(d: dict, where: str) -> KVStepRecord:
    pool_raw = d.get("pool") if isinstance(d, dict) else None
    seqs = _need(d, "seqs", where)
    regions = _need(d, "regions", where)
    if not isinstance(seqs, list) or not isinstance(regions, list):
        raise ValueError(f"{where}: seqs and regions must be lists")
    return KVStepRecord(
        step=int(_need(d, "step", where)),
        paged=stats_from_dict(_need(d, "paged", where), f"{where}.paged"),
        contiguous=stats_from_dict(_need(d, "contiguous", where), f"{where}.contiguous"),
        pool=pool_from_dict(pool_raw, f"{where}.pool") if pool_raw else None,
        regions=tuple(_build(ContiguousRegion, r, f"{where}.regions[{i}]")
                      for i, r in enumerate(regions)),
        contiguous_free=tuple((int(a), int(b)) for a, b in d.get("contiguous_free", [])),
        seqs=tuple(_build(SeqStep, s, f"{where}.seqs[{i}]") for i, s in enumerate(seqs)),
        events=tuple(str(e) for e in d.get("events", [])),
        ran_model=bool(d.get("ran_model", True)),
        step_s=float(d.get("step_s", 0.0)),
    )


def info_from_dict(d: dict, where: str) -> KVRunInfo:
    return _build(KVRunInfo, d, where)


def seq_info_from_dict(d: dict, where: str) -> SeqInfo:
    return _build(SeqInfo, d, where)
