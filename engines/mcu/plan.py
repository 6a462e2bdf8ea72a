"""The plan records: what a planner returns and the interpreter, the views and the board run.

`Plan` is one planner's arena layout for one model (buffers, their offsets, the arena and
its lower bound), optionally with an execution order, in-place aliases or a patch-based
stage. `PatchStage` and its `Tile`s describe such a stage (`engines.mcu.patching` makes
them). Frozen dataclasses, no behaviour beyond their own figures and `to_dict`.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.mcu.lifetimes import Buffer


@dataclass(frozen=True)
class Tile:
    """Patch `patch`'s region of operator `op`'s output: rows [r0, r1), columns [c0, c1).

    `buffer` is its index in `Plan.buffers`; None for the stage's last operator, whose
    tiles are written straight into the whole output tensor."""

    patch: int
    op: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    buffer: int | None


@dataclass(frozen=True)
class PatchStage:
    """Operators `ops` (consecutive, a chain) run patch by patch on a `grid` of patches."""

    ops: tuple[int, ...]
    grid: tuple[int, int]
    tiles: tuple[Tile, ...]  # patch-major, then in `ops` order
    tiled_tensors: tuple[int, ...]  # the stage's inner tensors: never held whole
    macs: int  # multiply-accumulates of the stage run patch by patch
    plain_macs: int  # ... run whole

    @property
    def patches(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def mac_overhead(self) -> float:
        """Extra work from overlapping patches: macs / plain_macs - 1."""
        return self.macs / self.plain_macs - 1 if self.plain_macs else 0.0

    def to_dict(self) -> dict:
        return {
            "ops": list(self.ops),
            "grid": list(self.grid),
            "patches": self.patches,
            "tiled_tensors": list(self.tiled_tensors),
            "macs": self.macs,
            "plain_macs": self.plain_macs,
            "mac_overhead": round(self.mac_overhead, 4),
            "tiles": [
                {
                    "patch": t.patch,
                    "op": t.op,
                    "rows": list(t.rows),
                    "cols": list(t.cols),
                    "buffer": t.buffer,
                }
                for t in self.tiles
            ],
        }


@dataclass(frozen=True)
class Plan:
    """One planner's arena layout for one model: what `inferlab mcu plan --json` prints.

    The optional fields are set by the model-level planners (`MODEL_PLANNERS`), which change
    the buffers before placing them; a plain plan leaves them at their defaults:

    - `op_order`: the operators' execution order (None: stored order); step j + 1 runs
      operator op_order[j].
    - `aliases`: (tensor, onto) pairs: `tensor` shares `onto`'s bytes (an in-place op);
      both appear in `buffers` at the same offset, so such pairs overlap on purpose.
    - `patch`: a patch-based stage (`PatchStage`, made by `engines.mcu.patching`): its operators run
      a spatial patch at a time, its inner tensors are never whole and their patch tiles
      are the buffers with `tensor` None named "patch ...".
    - `step_labels`: what runs at each step from 0, when steps are not one per operator.
    """

    planner: str
    buffers: tuple[Buffer, ...]
    offsets: tuple[int, ...]
    arena_bytes: int
    lower_bound_bytes: int
    op_order: tuple[int, ...] | None = None
    aliases: tuple[tuple[int, int], ...] = ()
    patch: PatchStage | None = None
    step_labels: tuple[str, ...] | None = None

    def to_dict(self) -> dict:
        out = {
            "planner": self.planner,
            "arena_bytes": self.arena_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "buffers": [
                {
                    "name": b.name,
                    "tensor": b.tensor,
                    "offset": o,
                    "size": b.size,
                    "first": b.first,
                    "last": b.last,
                }
                for b, o in zip(self.buffers, self.offsets, strict=True)
            ],
        }
        if self.op_order is not None:
            out["op_order"] = list(self.op_order)
        if self.aliases:
            out["aliases"] = [{"tensor": t, "onto": o} for t, o in self.aliases]
        if self.patch is not None:
            out["patch"] = self.patch.to_dict()
        if self.step_labels is not None:
            out["step_labels"] = list(self.step_labels)
        return out

    def high_water_by_step(self) -> list[tuple[int, int]]:
        """(step, highest arena byte in use) for every step from the first to the last."""
        if not self.buffers:
            return []
        lo = min(b.first for b in self.buffers)
        hi = max(b.last for b in self.buffers)
        return [
            (
                t,
                max(
                    (
                        o + b.size
                        for b, o in zip(self.buffers, self.offsets, strict=True)
                        if b.live_at(t)
                    ),
                    default=0,
                ),
            )
            for t in range(lo, hi + 1)
        ]
