"""The K sweep's records and their snapshot form (state["sweep"] of labs.speculative), apart
from the sweep itself so that the section reader needs no model or drafter to read them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from inferlab.engines.fields import (
    Setting,
    or_none,
    read_count,
    read_float,
    read_name,
    read_seconds,
)
from inferlab.engines.speculative.statistics import speedup_with_prefill
from inferlab.engines.trace.snapshot import section_field


@dataclass(frozen=True)
class KPoint:
    drafter: str
    k: int
    acceptance_rate: float
    mean_acceptance_length: float
    alpha: float
    tokens_per_target_forward: float
    theory_tokens_per_forward: float
    target_forwards: int
    cost_ratio: float
    predicted_speedup: float
    speedup_wall: float
    plain_s: float
    speculative_s: float
    draft_s: float
    target_forward_s: float
    outputs_equal: bool
    tree_width: int = 1
    """Candidates per step verified as one token tree (1: a chain of K drafts)."""
    theory_drafted_tokens_per_forward: float | None = None
    """The theory over each step's own draft length (statistics.
    expected_tokens_per_forward_drafted); None in snapshots from before it."""
    emitted_tokens: int | None = None
    """Tokens emitted over the prompts (each decode stops at the end of its answer or the
    token limit); None in snapshots from before it."""
    yield_per_target_forward: float | None = None
    """Tokens the target forwards yielded, accepted drafts plus the target's own token each,
    before the end of an answer cut a last step short: what the geometric theory over the
    drafts made predicts (emitted tokens per forward fall below it by the cut); None in
    snapshots from before it."""
    verify_cost_ratio: float | None = None
    """v(K): a K + 1-token target step's time over a 1-token one's, measured before the run
    (1.0 where it was not measured); None in snapshots from before it."""
    prefill_s: float | None = None
    """The prompts' prefill within `plain_s` (each prompt's first forward): in both wall
    times alike, as speculative decoding does not shorten it; None where not timed."""

    @property
    def predicted_speedup_wall(self) -> float | None:
        """`predicted_speedup` with the prefill added to both sides unchanged: what the model
        predicts for the wall clock (None without `prefill_s`)."""
        if self.prefill_s is None or not self.plain_s:
            return None
        return speedup_with_prefill(self.predicted_speedup, self.prefill_s / self.plain_s)

    @property
    def theory_gap(self) -> float | None:
        """yield_per_target_forward / theory_drafted_tokens_per_forward − 1: how far the
        forwards' yield is from the geometric theory over the drafts made (None where a
        snapshot lacks either)."""
        if self.yield_per_target_forward is None or not self.theory_drafted_tokens_per_forward:
            return None
        return self.yield_per_target_forward / self.theory_drafted_tokens_per_forward - 1.0

    def to_dict(self) -> dict:
        return asdict(self)

    def figures(self) -> dict:
        """The fields and, beside them, the theory gap (a bench row; derived, so not stored)."""
        return {**self.to_dict(), "theory_gap": self.theory_gap,
                "predicted_speedup_wall": self.predicted_speedup_wall}


@dataclass(frozen=True)
class KSweep:
    model: str
    drafter: str
    new_tokens: int
    points: tuple[KPoint, ...]


# ---- the snapshot: state["sweep"] of labs.speculative ---------------------------------------

_FLOATS = ("acceptance_rate", "mean_acceptance_length", "alpha", "tokens_per_target_forward",
           "theory_tokens_per_forward", "cost_ratio", "predicted_speedup", "speedup_wall",
           "plain_s", "speculative_s", "draft_s", "target_forward_s")
MAX_POINTS = 64


def sweep_to_dict(sweep: KSweep) -> dict:
    return {"model": sweep.model, "drafter": sweep.drafter, "new_tokens": sweep.new_tokens,
            "points": [p.to_dict() for p in sweep.points]}


def _width(v, where: str) -> int:
    """A point's tree width (absent in older snapshots: 1, a chain)."""
    return Setting("int", 1, 64).check(v, where)


def _optional(p: dict, key: str, read, where: str):
    """A point's field added after the first snapshots: None where absent (or null)."""
    return or_none(read)(p.get(key), f"{where}.{key}")


def _number(v, where: str) -> float:
    """A point's figure: a finite number >= 0."""
    return read_float(v, where, 0.0)


def _k(v, where: str) -> int:
    return Setting("int", 0, 1024).check(v, where)


def sweep_from_dict(d, where: str) -> KSweep:
    """A `KSweep` from its dict; ValueError naming the field."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected an object")
    texts = {}
    for key in ("model", "drafter"):
        texts[key] = read_name(section_field(d, key, where), f"{where}.{key}")
    new_tokens = read_count(section_field(d, "new_tokens", where), f"{where}.new_tokens")
    raw = section_field(d, "points", where)
    if not isinstance(raw, list) or len(raw) > MAX_POINTS:
        raise ValueError(f"{where}.points: expected a list of at most {MAX_POINTS} points")
    points = []
    for i, p in enumerate(raw):
        w = f"{where}.points[{i}]"
        if not isinstance(p, dict):
            raise ValueError(f"{w}: expected an object")
        equal = section_field(p, "outputs_equal", w)
        if not isinstance(equal, bool):
            raise ValueError(f"{w}.outputs_equal: expected true or false")
        floats = {k: _number(section_field(p, k, w), f"{w}.{k}") for k in _FLOATS}
        points.append(KPoint(
            drafter=texts["drafter"], k=_k(section_field(p, "k", w), f"{w}.k"),
            target_forwards=read_count(section_field(p, "target_forwards", w),
                                       f"{w}.target_forwards"),
            outputs_equal=equal,
            tree_width=_width(p.get("tree_width", 1), f"{w}.tree_width"),
            theory_drafted_tokens_per_forward=_optional(
                p, "theory_drafted_tokens_per_forward", _number, w),
            emitted_tokens=_optional(p, "emitted_tokens", read_count, w),
            verify_cost_ratio=_optional(p, "verify_cost_ratio", _number, w),
            yield_per_target_forward=_optional(p, "yield_per_target_forward", _number, w),
            prefill_s=_optional(p, "prefill_s", read_seconds, w),
            **floats))
    return KSweep(texts["model"], texts["drafter"], new_tokens, tuple(points))
