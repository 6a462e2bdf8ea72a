"""Patch-based execution of a CNN's first layers, as MCUNetV2 does it (Lin et al., 2021).

A CNN's first layers hold its largest activations: on person_detect the 48x48x8 input and
48x48x16 output of the third operator alone are TFLM's whole 55,296-byte arena. Those layers
are cheap to compute a piece at a time, so instead of producing each whole tensor, a
*stage* of operators runs one spatial patch at a time: the stage's last output is cut into
a grid of patches, and for each patch every stage operator computes only the region of its
output that the patch needs (the receptive field, traced back through the stage, clipped
to the image). The regions of neighbouring patches overlap, so some work is done twice
(`PatchStage.macs` against `plain_macs`); in exchange only ONE patch's tiles are alive at
a time, next to the stage's input and its (whole) output.

Bit-exactness: a tile is computed by the same kernel arithmetic as the whole tensor
(`kernels.REGION_KERNELS`), with padding exactly where the whole tensor has it, so the
stage output equals the plain run byte for byte.

The arena: steps are counted as TFLM does, one per operator run, so the stage's K
operators take P x K steps (patch p, operator k at step s + 1 + p K + k). The stage input
lives until the last patch has read it, the stage output from the first patch's write on;
the tiles of the stage's inner tensors are buffers of their own (tensor None) living from
the operator that writes them to the one that reads them. `plan_best` places them all in
one arena with the rest of the graph; `ArenaInterpreter` runs such a plan.

`plan_patch_based(model)` searches the stage length and the grid (n x n patches) for the
smallest arena, preferring less recomputation among equal arenas.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from inferlab.engines.mcu.graph import Model, ModelError
from inferlab.engines.mcu.kernels import KERNELS, REGION_KERNELS, OpContext, Window
from inferlab.engines.mcu.kernels.common import pad_before
from inferlab.engines.mcu.lifetimes import Buffer, align_up, scheduled_buffers
from inferlab.engines.mcu.op_costs import op_macs
from inferlab.engines.mcu.plan import PatchStage, Plan, Tile
from inferlab.engines.mcu.planners import PLANNERS, arena_bytes, lower_bound_bytes

MAX_GRID = 8  # patches per side tried by the search
MAX_MAC_OVERHEAD = 0.2  # recomputation allowed, as a share of the whole model's MACs
SHORTLIST = 4  # candidates (by lower bound) that are planned in full


# ---- which operators can form a stage ----------------------------------------------------


def op_window(model: Model, op_index: int) -> Window:
    """The sliding-window geometry of a CONV_2D, DEPTHWISE_CONV_2D or pooling operator, as
    its kernel computes it."""
    op = model.operators[op_index]
    x, y = model.tensors[op.inputs[0]], model.tensors[op.outputs[0]]
    opt = op.options
    if op.op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        _, kh, kw, _ = model.tensors[op.inputs[1]].shape
        dh = int(opt.get("dilation_h_factor", 1) or 1)
        dw = int(opt.get("dilation_w_factor", 1) or 1)
    else:
        kh, kw = int(opt.get("filter_height", 1)), int(opt.get("filter_width", 1))
        dh = dw = 1
    sh, sw = int(opt.get("stride_h", 1)), int(opt.get("stride_w", 1))
    _, h, w, _ = x.shape
    _, oh, ow, _ = y.shape
    return Window(
        in_h=h,
        in_w=w,
        kernel_h=kh,
        kernel_w=kw,
        stride_h=sh,
        stride_w=sw,
        dilation_h=dh,
        dilation_w=dw,
        pad_h=pad_before(sh, dh, h, kh, oh),
        pad_w=pad_before(sw, dw, w, kw, ow),
    )


def _consumers(model: Model) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for op in model.operators:
        for t in set(op.inputs):
            if t >= 0:
                out.setdefault(t, []).append(op.index)
    return out


def _patchable(model: Model, op_index: int) -> bool:
    op = model.operators[op_index]
    if op.is_custom or op.op not in REGION_KERNELS or len(op.outputs) != 1 or not op.inputs:
        return False
    x, y = model.tensors[op.inputs[0]], model.tensors[op.outputs[0]]
    return len(x.shape) == 4 and len(y.shape) == 4 and not x.is_constant


def stage_chain(model: Model) -> tuple[int, ...]:
    """The longest run of consecutive sliding-window operators from the first one in stored
    order, each reading only the previous one's output, which nothing else reads."""
    first = next((i for i in range(len(model.operators)) if _patchable(model, i)), None)
    if first is None:
        return ()
    consumers = _consumers(model)
    outputs = set(model.outputs)
    chain = [first]
    while chain[-1] + 1 < len(model.operators):
        prev, nxt = model.operators[chain[-1]], chain[-1] + 1
        t = prev.outputs[0]
        if not _patchable(model, nxt) or model.operators[nxt].inputs[0] != t:
            break
        if consumers.get(t) != [nxt] or t in outputs:
            break
        chain.append(nxt)
    return tuple(chain)


def stage_candidates(model: Model) -> list[tuple[int, ...]]:
    """Every prefix of `stage_chain` with at least two operators (one operator alone cannot
    shrink anything: its input and output are both whole)."""
    chain = stage_chain(model)
    return [chain[:k] for k in range(2, len(chain) + 1)]


# ---- tiles and buffers ---------------------------------------------------------------------


def _splits(n: int, parts: int) -> list[tuple[int, int]]:
    cuts = [round(i * n / parts) for i in range(parts + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def _axis_traces(windows: Sequence[Window], size: int, parts: int, axis: int):
    """Per part of the stage output's rows (axis 0) or columns (axis 1): the span each stage
    operator's output needs, traced back through the windows. Rows and columns are
    independent, so a patch's regions are a row trace times a column trace."""
    out = []
    for span in _splits(size, parts):
        trace = [span]
        for win in reversed(windows[1:]):
            trace.insert(0, win.rows_read(*trace[0]) if axis == 0 else win.cols_read(*trace[0]))
        out.append(trace)
    return out


def _stage_windows(model: Model, ops: Sequence[int]) -> list[Window]:
    return [op_window(model, i) for i in ops]


def patch_regions(
    model: Model, ops: Sequence[int], grid: tuple[int, int], windows=None
) -> list[list[tuple[tuple[int, int], tuple[int, int]]]]:
    """Per patch (row-major over the grid), per stage operator: the (rows, cols) of its
    output the patch computes."""
    windows = windows if windows is not None else _stage_windows(model, ops)
    _, oh, ow, _ = model.tensors[model.operators[ops[-1]].outputs[0]].shape
    row_traces = _axis_traces(windows, oh, grid[0], 0)
    col_traces = _axis_traces(windows, ow, grid[1], 1)
    return [list(zip(rows, cols, strict=True)) for rows in row_traces for cols in col_traces]


def _tensor_bytes(model: Model, tensor: int, rows, cols) -> int:
    t = model.tensors[tensor]
    n, h, w, _ = t.shape
    return t.nbytes // (h * w) * (rows[1] - rows[0]) * (cols[1] - cols[0])


def _macs_per_pixel(model: Model, ops: Sequence[int]) -> dict[int, int]:
    """Operator -> multiply-accumulates per output pixel (all channels)."""
    out = {}
    for i in ops:
        _, h, w, _ = model.tensors[model.operators[i].outputs[0]].shape
        out[i] = op_macs(model, i) // (h * w)
    return out


def stage_macs(
    model: Model, ops: Sequence[int], grid: tuple[int, int], windows=None
) -> tuple[int, int]:
    """(MACs run patch by patch, MACs run whole) of a stage."""
    windows = windows if windows is not None else _stage_windows(model, ops)
    per_pixel = _macs_per_pixel(model, ops)
    _, oh, ow, _ = model.tensors[model.operators[ops[-1]].outputs[0]].shape
    row_traces = _axis_traces(windows, oh, grid[0], 0)
    col_traces = _axis_traces(windows, ow, grid[1], 1)
    patched = whole = 0
    for k, i in enumerate(ops):
        rows = sum(t[k][1] - t[k][0] for t in row_traces)
        cols = sum(t[k][1] - t[k][0] for t in col_traces)
        _, h, w, _ = model.tensors[model.operators[i].outputs[0]].shape
        patched += per_pixel[i] * rows * cols
        whole += per_pixel[i] * h * w
    return patched, whole


def patch_schedule(
    model: Model, ops: Sequence[int], grid: tuple[int, int], windows=None
) -> tuple[list[Buffer], PatchStage, tuple[str, ...]]:
    """The buffers (whole tensors, then tiles), the stage record and the step labels of
    running `ops` patch by patch on `grid`."""
    ops = tuple(ops)
    n_ops, k_ops = len(model.operators), len(ops)
    s, e = ops[0], ops[-1]
    windows = windows if windows is not None else _stage_windows(model, ops)
    regions = patch_regions(model, ops, grid, windows)
    patches = len(regions)

    def step(p: int, k: int) -> int:
        return s + 1 + p * k_ops + k

    spans: list[tuple[int, int]] = []
    for i in range(n_ops):
        if i < s:
            spans.append((i + 1, i + 1))
        elif i <= e:
            k = i - s
            spans.append((step(0, k), step(patches - 1, k)))
        else:
            t = s + patches * k_ops + (i - e)
            spans.append((t, t))
    end_step = s + patches * k_ops + (n_ops - 1 - e)
    inner = tuple(model.operators[i].outputs[0] for i in ops[:-1])
    buffers = scheduled_buffers(model, spans, end_step, skip_tensors=inner)

    tiles = []
    for p, regs in enumerate(regions):
        for k, i in enumerate(ops):
            rows, cols = regs[k]
            index = None
            if k < k_ops - 1:
                index = len(buffers)
                size = align_up(_tensor_bytes(model, model.operators[i].outputs[0], rows, cols))
                name = (
                    f"patch {p} {model.operators[i].op}#{i} rows {rows[0]}..{rows[1]} "
                    f"cols {cols[0]}..{cols[1]}"
                )
                buffers.append(Buffer(size, step(p, k), step(p, k + 1), None, name))
            tiles.append(Tile(p, i, rows, cols, index))

    macs, plain = stage_macs(model, ops, grid, windows)
    stage = PatchStage(
        ops=ops,
        grid=tuple(grid),
        tiles=tuple(tiles),
        tiled_tensors=inner,
        macs=int(macs),
        plain_macs=int(plain),
    )
    labels = ["inputs"]
    for i in range(s):
        labels.append(f"{model.operators[i].op}#{i}")
    for p in range(patches):
        for i in ops:
            labels.append(f"patch {p}: {model.operators[i].op}#{i}")
    for i in range(e + 1, n_ops):
        labels.append(f"{model.operators[i].op}#{i}")
    return buffers, stage, tuple(labels)


def plan_stage(
    model: Model, ops: Sequence[int], grid: tuple[int, int], planner: str = "best"
) -> Plan:
    """The plan of one stage and grid, placed by `planner`."""
    buffers, stage, labels = patch_schedule(model, ops, grid)
    offsets = PLANNERS[planner](buffers)
    return Plan(
        planner="patch-based",
        buffers=tuple(buffers),
        offsets=tuple(offsets),
        arena_bytes=arena_bytes(buffers, offsets),
        lower_bound_bytes=lower_bound_bytes(buffers),
        patch=stage,
        step_labels=labels,
    )


def plan_patch_based(
    model: Model,
    planner: str = "best",
    max_grid: int = MAX_GRID,
    max_mac_overhead: float | None = MAX_MAC_OVERHEAD,
) -> Plan:
    """The smallest patch-based plan over the stage candidates and n x n grids (n >= 2)
    whose recomputation adds at most `max_mac_overhead` of the whole model's MACs (None:
    any); fewer MACs first among equal arenas. Raises `ModelError` (a ValueError) when the
    model has no stage to patch."""
    total = sum(op_macs(model, i) for i in range(len(model.operators)))
    candidates = []
    chain = stage_chain(model)
    all_windows = _stage_windows(model, chain)
    for ops in stage_candidates(model):
        windows = all_windows[: len(ops)]
        _, oh, ow, _ = model.tensors[model.operators[ops[-1]].outputs[0]].shape
        kept = 0
        for g in range(2, min(max_grid, oh, ow) + 1):
            macs, plain = stage_macs(model, ops, (g, g), windows)
            if max_mac_overhead is not None and macs - plain > max_mac_overhead * total:
                continue
            buffers, _, _ = patch_schedule(model, ops, (g, g), windows)
            candidates.append((lower_bound_bytes(buffers), macs, ops, (g, g)))
            kept += 1
        if not kept:
            break  # a longer stage only recomputes more
    if not candidates:
        raise ModelError(
            f"{model.name}: no stage to run patch by patch (it needs two or more "
            f"consecutive {', '.join(sorted(REGION_KERNELS))} operators in a chain"
            + (
                f", recomputing at most {max_mac_overhead:.0%} of the model's MACs)"
                if max_mac_overhead is not None
                else ")"
            )
        )
    candidates.sort(key=lambda c: (c[0], c[1]))
    best = None
    for floor, macs, ops, grid in candidates[:SHORTLIST]:
        if best is not None and (best.arena_bytes, best.patch.macs) <= (floor, macs):
            break  # no later candidate can beat it: their lower bounds are higher
        plan = plan_stage(model, ops, grid, planner)
        if best is None or (plan.arena_bytes, macs) < (best.arena_bytes, best.patch.macs):
            best = plan
    return best


def patch_applicable(model: Model) -> bool:
    """Whether the model has a stage `plan_patch_based` can run patch by patch."""
    return bool(stage_candidates(model))


# ---- running -------------------------------------------------------------------------------


def bind_patch_schedule(model: Model, plan: Plan, arena: bytearray, arrays):
    """(operator index, run) in execution order for `ArenaInterpreter`: the operators
    before the stage, the stage patch by patch (each tile a view at its planned offset in
    `arena`), then the rest. `arrays` holds the whole tensors' views."""
    stage = plan.patch
    ops = model.operators
    if any(i >= len(ops) for i in stage.ops) or stage.ops != tuple(
        range(stage.ops[0], stage.ops[-1] + 1)
    ):
        raise ValueError(f"plan ({plan.planner}) has a patch stage made for another model")
    region_runs = {}
    for i in stage.ops:
        op = ops[i]
        if op.op not in REGION_KERNELS:
            raise ValueError(f"operator {i} ({op.op}) cannot run patch by patch")
        region_runs[i] = REGION_KERNELS[op.op](OpContext(model, op, arrays))

    def tile_view(tile: Tile) -> np.ndarray:
        if tile.buffer is None:  # the stage output: a window of the whole tensor
            out = arrays[ops[tile.op].outputs[0]]
            return out[:, tile.rows[0] : tile.rows[1], tile.cols[0] : tile.cols[1]]
        t = model.tensors[ops[tile.op].outputs[0]]
        n, _, _, c = t.shape
        shape = (n, tile.rows[1] - tile.rows[0], tile.cols[1] - tile.cols[0], c)
        count = int(np.prod(shape))
        buf, off = plan.buffers[tile.buffer], plan.offsets[tile.buffer]
        if buf.size < count * np.dtype(t.dtype).itemsize or off + buf.size > len(arena):
            raise ValueError(f"plan ({plan.planner}) tile {buf.name!r} does not fit its buffer")
        return np.frombuffer(arena, dtype=np.dtype(t.dtype), count=count, offset=off).reshape(shape)

    def tile_run(i: int, x, x_origin, out, out_origin):
        run_region = region_runs[i]

        def run() -> None:
            run_region(x, x_origin, out, out_origin)

        return run

    schedule = []
    for i in range(stage.ops[0]):
        schedule.append((i, KERNELS[ops[i].op](OpContext(model, ops[i], arrays))))
    previous: dict[int, Tile] = {}
    for tile in stage.tiles:
        k = stage.ops.index(tile.op)
        if k == 0:
            x, x_origin = arrays[ops[tile.op].inputs[0]], (0, 0)
        else:
            src = previous[tile.patch]
            x, x_origin = tile_view(src), (src.rows[0], src.cols[0])
        out = tile_view(tile)
        schedule.append(
            (tile.op, tile_run(tile.op, x, x_origin, out, (tile.rows[0], tile.cols[0])))
        )
        previous[tile.patch] = tile
    for i in range(stage.ops[-1] + 1, len(ops)):
        schedule.append((i, KERNELS[ops[i].op](OpContext(model, ops[i], arrays))))
    return schedule
