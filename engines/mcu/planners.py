"""Arena planners: buffers (size, first step, last step) in, one offset per buffer out.

Every planner has the same narrow signature, `planner(buffers) -> offsets`, the way TFLM's
MicroMemoryPlanner sees only buffer requirements and never an operator:

- `plan_linear`: no reuse; offsets are the prefix sums, the arena is the sum of sizes
  (TFLM's LinearMemoryPlanner).
- `plan_tflm_greedy`: TFLM's GreedyMemoryPlanner, decision for decision. Buffers are taken
  largest first; equal sizes keep TFLM's tie-break (the buffer added later goes first,
  because TFLM fills its sort array from the back and bubble-sorts it stably). Each one
  is put at the lowest offset where it fits between the already-placed buffers whose
  lifetimes overlap its own.
- `plan_best`: ours. First-fit and best-fit placement over several orderings, TFLM's
  result, and for small buffer sets an exact branch and bound; the smallest valid plan.

The arena a plan needs is max(offset + size). No plan can beat the lower bound: the
largest total size of buffers live at the same step.

`plan_buffers` runs one by name and returns a `Plan` (`engines.mcu.plan`). Beyond TFLM, the
model-level planners change the buffers before placing them (in-place aliasing, operator
reordering, patch-based execution): `engines.mcu.model_planners.plan_model` runs either kind
by name.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from inferlab.engines.mcu.lifetimes import Buffer
from inferlab.engines.mcu.plan import Plan

Planner = Callable[[Sequence[Buffer]], list[int]]

# The exact search runs on buffer lists up to this length and stops after this many nodes
# (it then keeps the best plan found so far, which is never worse than the heuristics).
EXACT_MAX_BUFFERS = 24
EXACT_NODE_BUDGET = 2_000


def arena_bytes(buffers: Sequence[Buffer], offsets: Sequence[int]) -> int:
    """Bytes of arena a plan uses: max(offset + size), 0 for no buffers."""
    return max((o + b.size for b, o in zip(buffers, offsets, strict=True)), default=0)


def lower_bound_bytes(buffers: Sequence[Buffer]) -> int:
    """The largest total size of buffers live at one step: no plan can use less."""
    events = []
    for b in buffers:
        events.append((b.first, 1, b.size))
        events.append((b.last + 1, 0, -b.size))  # inclusive: ends before a start there
    live = peak = 0
    for _, _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak


def conflicts(buffers: Sequence[Buffer], offsets: Sequence[int]) -> list[tuple[int, int]]:
    """Pairs (i, j) of buffers that are live at the same step and share arena bytes."""
    out = []
    for i, (a, oa) in enumerate(zip(buffers, offsets, strict=True)):
        for j in range(i + 1, len(buffers)):
            b, ob = buffers[j], offsets[j]
            if a.overlaps_in_time(b) and oa < ob + b.size and ob < oa + a.size:
                out.append((i, j))
    return out


# ---- planners ------------------------------------------------------------------------


def plan_linear(buffers: Sequence[Buffer]) -> list[int]:
    """No reuse: each buffer after the previous one, in the given order."""
    offsets, end = [], 0
    for b in buffers:
        offsets.append(end)
        end += b.size
    return offsets


def tflm_order(buffers: Sequence[Buffer]) -> list[int]:
    """TFLM's placement order: size descending, later-added first among equal sizes."""
    return sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, -i))


def plan_tflm_greedy(buffers: Sequence[Buffer]) -> list[int]:
    """TFLM's GreedyMemoryPlanner: largest first, each at the first gap that fits."""
    return _place(buffers, tflm_order(buffers), best_fit=False)


def plan_best(buffers: Sequence[Buffer]) -> list[int]:
    """The smallest valid plan we can find; never larger than TFLM's greedy plan."""
    floor = lower_bound_bytes(buffers)
    best = plan_tflm_greedy(buffers)
    best_bytes = arena_bytes(buffers, best)
    for order in _orderings(buffers):
        if best_bytes <= floor:
            return best
        for best_fit in (False, True):
            offsets = _place(buffers, order, best_fit)
            size = arena_bytes(buffers, offsets)
            if size < best_bytes and not conflicts(buffers, offsets):
                best, best_bytes = offsets, size
    if best_bytes > floor and len(buffers) <= EXACT_MAX_BUFFERS:
        found = _exact_search(buffers, best_bytes, floor, EXACT_NODE_BUDGET)
        if found is not None and not conflicts(buffers, found):
            best = found
    return best


PLANNERS: dict[str, Planner] = {
    "linear": plan_linear,
    "tflm-greedy": plan_tflm_greedy,
    "best": plan_best,
}


# ---- placement -----------------------------------------------------------------------


def _place(buffers: Sequence[Buffer], order: Sequence[int], best_fit: bool) -> list[int]:
    """Place buffers one by one in `order` among the time-overlapping ones already placed.

    First fit walks the placed buffers by offset, exactly as TFLM does, and stops at the
    first gap that is big enough. Best fit takes the smallest such gap (lowest offset on
    ties), else the top.
    """
    offsets = [0] * len(buffers)
    placed_offsets: list[int] = []  # ascending; equal offsets keep insertion order
    placed_ids: list[int] = []
    for i in order:
        want = buffers[i]
        candidate = 0
        choice, choice_gap = None, None
        for off, j in zip(placed_offsets, placed_ids, strict=True):
            other = buffers[j]
            if not want.overlaps_in_time(other):
                continue
            gap = off - candidate
            if gap >= want.size:
                if not best_fit:
                    choice = candidate
                    break
                if choice_gap is None or gap < choice_gap:
                    choice, choice_gap = candidate, gap
            candidate = max(candidate, off + other.size)
        if choice is None:
            choice = candidate
        offsets[i] = choice
        k = bisect.bisect_right(placed_offsets, choice)
        placed_offsets.insert(k, choice)
        placed_ids.insert(k, i)
    return offsets


def _orderings(buffers: Sequence[Buffer]):
    """Placement orders worth trying; TFLM's is first."""
    n = range(len(buffers))

    def span(i: int) -> int:
        return buffers[i].last - buffers[i].first + 1

    def crowd(i: int) -> int:
        return sum(b.size for b in buffers if b.overlaps_in_time(buffers[i]))

    yield tflm_order(buffers)
    yield sorted(n, key=lambda i: (-buffers[i].size, -span(i), i))
    yield sorted(n, key=lambda i: (-buffers[i].size * span(i), i))
    yield sorted(n, key=lambda i: (-span(i), -buffers[i].size, i))
    yield sorted(n, key=lambda i: (-crowd(i), -buffers[i].size, i))
    yield sorted(n, key=lambda i: (buffers[i].first, -buffers[i].size, i))


# ---- exact search --------------------------------------------------------------------


def _exact_search(
    buffers: Sequence[Buffer], incumbent: int, floor: int, budget: int
) -> list[int] | None:
    """Branch and bound over "gravity" plans; returns a plan smaller than `incumbent`.

    Any plan can be pushed down until every buffer rests on offset 0 or on the top of a
    buffer that overlaps it in time. Placing buffers in ascending offset order, each one
    then sits at 0 or at the top of an already-placed overlapping buffer, so searching
    those choices (offsets never decreasing) covers an optimal plan. The bound for a
    node: every step's unplaced buffers must stack above the current offset, on top of
    what placed buffers already occupy there.
    """
    items = [i for i, b in enumerate(buffers) if b.size > 0]
    if not items:
        return None
    times = sorted({buffers[i].first for i in items})
    covers = {i: [k for k, t in enumerate(times) if buffers[i].live_at(t)] for i in items}
    overlapping = {
        i: [j for j in items if j != i and buffers[i].overlaps_in_time(buffers[j])] for i in items
    }
    remaining = [0] * len(times)
    for i in items:
        for k in covers[i]:
            remaining[k] += buffers[i].size

    offsets: dict[int, int] = {}
    best: list[int | None] = [None]
    best_bytes = [incumbent]
    nodes = [0]

    def bound(base: int, top: int) -> int:
        worst = top
        occupied = [0] * len(times)
        for j, o in offsets.items():
            end = o + buffers[j].size
            if end > base:
                for k in covers[j]:
                    occupied[k] += end - max(o, base)
        for k in range(len(times)):
            if remaining[k]:
                worst = max(worst, base + occupied[k] + remaining[k])
        return worst

    def search(base: int, last_item: int, top: int) -> bool:
        if len(offsets) == len(items):
            best_bytes[0] = top
            best[0] = [offsets.get(i, 0) for i in range(len(buffers))]
            return top <= floor  # optimal: stop everything
        nodes[0] += 1
        if nodes[0] > budget:
            return True
        children = []
        for i in items:
            if i in offsets:
                continue
            size = buffers[i].size
            spots = {0} | {offsets[j] + buffers[j].size for j in overlapping[i] if j in offsets}
            for o in spots:
                if o < base or (o == base and i < last_item):
                    continue
                if any(
                    o < offsets[j] + buffers[j].size and offsets[j] < o + size
                    for j in overlapping[i]
                    if j in offsets
                ):
                    continue
                children.append((o, -size, i))
        children.sort()
        for o, neg_size, i in children:
            new_top = max(top, o - neg_size)
            if new_top >= best_bytes[0]:
                continue
            offsets[i] = o
            for k in covers[i]:
                remaining[k] += neg_size
            if bound(o, new_top) < best_bytes[0] and search(o, i, new_top):
                return True
            for k in covers[i]:
                remaining[k] -= neg_size
            del offsets[i]
        return False

    search(0, -1, 0)
    return best[0]


def plan_buffers(buffers: Sequence[Buffer], planner: str = "tflm-greedy") -> Plan:
    """Run one of `PLANNERS` by name on a buffer list."""
    try:
        fn = PLANNERS[planner]
    except KeyError:
        raise ValueError(
            f"unknown planner {planner!r}; expected one of {', '.join(PLANNERS)}"
        ) from None
    buffers = tuple(buffers)
    offsets = tuple(fn(buffers))
    return Plan(
        planner=planner,
        buffers=buffers,
        offsets=offsets,
        arena_bytes=arena_bytes(buffers, offsets),
        lower_bound_bytes=lower_bound_bytes(buffers),
    )
