"""The INT8 reference interpreter that runs a model inside ONE planned arena.

`ArenaInterpreter(model, plan)` allocates a single `bytearray(plan.arena_bytes)` and never
another: every planned tensor is a numpy view at its planned offset
(`np.frombuffer(arena, dtype, count, offset).reshape(shape)`), weights and biases are
read-only views into the model file ("flash"), and each kernel writes its result into its
output view. Two tensors the plan places on the same bytes share them for real, so a plan
that is wrong (two live tensors overlapping) gives wrong outputs: running a plan is a test
of it. RESHAPE aliased onto its input (an in-place plan) copies nothing.

The kernels are TFLM's reference integer kernels, bit for bit (see `engines.mcu.kernels`).
Numpy needs temporaries to vectorise them; none is kept between calls and each kernel works
through its output in bands of about `kernels.common.BAND_VALUES` values (4096), so they
stay bounded whatever the layer (at most ~260 KiB per op on person_detect, ~230 KiB on
micro_speech, a few KiB on hello_world). Per band they are:
CONV_2D: the input rows widened to int32 (+ a zero-padded copy where the window overhangs),
per tap a contiguous copy of the window, the filter widened to int32 a block of output
channels at a time, the int32 accumulator. DEPTHWISE_CONV_2D: the same input copies (with
channels repeated when depth_multiplier > 1), the filter widened to int32, an int32
accumulator and product. FULLY_CONNECTED: the input rows and a block of filter rows widened
to int32, the accumulator. Then one int64 copy of the accumulator and its remainder for the
requantisation. Pooling: the padded input rows (int32 for average) and an accumulator.
SOFTMAX, ADD, QUANTIZE, DEQUANTIZE: int64/float64 temporaries of the band. RESHAPE: none.

A plan may also fix the execution order (`Plan.op_order`, operator reordering) or run the
first layers a spatial patch at a time (`Plan.patch`, engines.mcu.patching): the operators
then run in that order, each patch's tiles at their planned offsets in the same arena.
`last_op_times_s` stays one figure per operator (stored order), summed over its patches.
An operator's multiply-accumulates are `engines.mcu.op_costs.op_macs`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from inferlab.engines.mcu.graph import Model
from inferlab.engines.mcu.kernels import KERNELS, OpContext, UnsupportedOpError
from inferlab.engines.mcu.lifetimes import is_planned
from inferlab.engines.mcu.patching import bind_patch_schedule
from inferlab.engines.mcu.plan import Plan

__all__ = ["ArenaInterpreter", "UnsupportedOpError", "supported_ops"]

_ARRAY_DTYPES = {
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "float32",
    "float16",
    "float64",
    "bool",
    "uint16",
    "uint32",
    "uint64",
}


def supported_ops() -> tuple[str, ...]:
    """Builtin op names the interpreter has kernels for."""
    return tuple(sorted(KERNELS))


def check_supported(model: Model) -> None:
    """Raise `UnsupportedOpError` naming the first operator without a kernel."""
    for op in model.operators:
        if op.is_custom or op.op not in KERNELS:
            kind = "custom op" if op.is_custom else "op"
            raise UnsupportedOpError(
                f"operator {op.index} ({op.op}): {kind} {op.op!r} is not supported by the "
                f"arena interpreter (it runs {', '.join(supported_ops())})"
            )


class ArenaInterpreter:
    """Runs `model` with every activation at its offset in `plan`'s one arena, in the plan's
    execution order (stored order unless the plan says otherwise)."""

    def __init__(self, model: Model, plan: Plan):
        check_supported(model)
        self.model = model
        self.plan = plan
        self.arena = bytearray(plan.arena_bytes)
        # Exporting the arena's buffer below makes any resize of it a BufferError.
        self._arena_bytes_view = np.frombuffer(self.arena, dtype=np.uint8)
        self.arrays: list[np.ndarray | None] = self._bind_arrays()
        # (operator index, run) in execution order: the plan's op_order, or for a
        # patch-based plan each stage operator once per patch, then the rest.
        self._schedule: list[tuple[int, Callable[[], None]]] = self._bind_schedule()
        self.last_op_times_s: tuple[float, ...] = ()
        self.invocations = 0

    # ---- binding tensors to memory -----------------------------------------------------

    def _bind_arrays(self) -> list[np.ndarray | None]:
        model, plan = self.model, self.plan
        offsets: dict[int, tuple[int, int]] = {}
        for buf, off in zip(plan.buffers, plan.offsets, strict=True):
            if buf.tensor is not None:
                offsets[buf.tensor] = (off, buf.size)
        arrays: list[np.ndarray | None] = [None] * len(model.tensors)
        tiled = set(plan.patch.tiled_tensors) if plan.patch is not None else set()
        for t in model.tensors:
            if t.dtype not in _ARRAY_DTYPES or t.index in tiled:
                continue
            if t.is_constant:
                arrays[t.index] = model.constant_array(t.index)
            elif t.index in offsets:
                off, size = offsets[t.index]
                if size < t.nbytes or off < 0 or off + t.nbytes > len(self.arena):
                    raise ValueError(
                        f"plan gives tensor {t.index} {t.name!r} {size} bytes at offset {off} "
                        f"in a {len(self.arena)}-byte arena; it needs {t.nbytes}"
                    )
                arrays[t.index] = np.frombuffer(
                    self.arena, dtype=np.dtype(t.dtype), count=t.elements, offset=off
                ).reshape(t.shape)
            elif t.nbytes == 0:
                arrays[t.index] = np.zeros(t.shape, dtype=np.dtype(t.dtype))
            elif is_planned(model, t.index):
                raise ValueError(
                    f"plan ({plan.planner}) has no buffer for tensor {t.index} {t.name!r}: "
                    f"it was made for another model"
                )
        for op in model.operators:
            for i in (*op.inputs, *op.outputs):
                if i >= 0 and arrays[i] is None and i not in tiled:
                    t = model.tensors[i]
                    why = "a variable" if t.is_variable else f"of type {t.dtype}"
                    raise UnsupportedOpError(
                        f"operator {op.index} ({op.op}): tensor {i} {t.name!r} is {why}, "
                        "which the arena interpreter does not hold"
                    )
        return arrays

    def _bind_schedule(self) -> list[tuple[int, Callable[[], None]]]:
        model, plan = self.model, self.plan
        if plan.patch is not None:
            return bind_patch_schedule(model, plan, self.arena, self.arrays)
        order = plan.op_order if plan.op_order is not None else range(len(model.operators))
        if sorted(order) != list(range(len(model.operators))):
            raise ValueError(f"plan ({plan.planner}) op_order is not a permutation of the operators")
        ops = model.operators
        return [(i, KERNELS[ops[i].op](OpContext(model, ops[i], self.arrays))) for i in order]

    # ---- running -----------------------------------------------------------------------

    @property
    def arena_bytes(self) -> int:
        return len(self.arena)

    @property
    def arena_address(self) -> int:
        """Address of the arena's first byte (stable for the interpreter's life)."""
        return int(self._arena_bytes_view.ctypes.data)

    def input_view(self, k: int = 0) -> np.ndarray:
        """The arena view of graph input k (writable; `invoke` copies into it)."""
        return self.arrays[self.model.inputs[k]]

    def tensor(self, index: int) -> np.ndarray:
        """A copy of tensor `index`'s current contents (arena or weights)."""
        a = self.arrays[index]
        if a is None:
            raise ValueError(f"tensor {index} has no array")
        return a.copy()

    def invoke(self, inputs: np.ndarray | Sequence[np.ndarray]):
        """Copy the input(s) into the arena, run every operator in the plan's order, return a
        copy of the output (a tuple of copies for a model with several outputs)."""
        if len(self.model.inputs) == 1 and isinstance(inputs, np.ndarray):
            inputs = (inputs,)
        inputs = tuple(inputs)
        if len(inputs) != len(self.model.inputs):
            raise ValueError(f"model takes {len(self.model.inputs)} inputs, got {len(inputs)}")
        for k, value in enumerate(inputs):
            self._set_input(k, value)
        times = [0.0] * len(self.model.operators)
        clock = time.perf_counter
        for i, run in self._schedule:
            t0 = clock()
            run()
            times[i] += clock() - t0
        self.last_op_times_s = tuple(times)
        self.invocations += 1
        outs = tuple(self.arrays[i].copy() for i in self.model.outputs)
        return outs[0] if len(outs) == 1 else outs

    def invoke_many(self, batch: Iterable[np.ndarray]):
        """`invoke` on each input in turn; one output model: an array stacked on axis 0."""
        outs = [self.invoke(x) for x in batch]
        if len(self.model.outputs) == 1:
            return np.stack(outs) if outs else np.empty((0,), dtype=np.int8)
        return outs

    def _set_input(self, k: int, value) -> None:
        view = self.input_view(k)
        t = self.model.tensors[self.model.inputs[k]]
        arr = np.asarray(value)
        if arr.size != view.size:
            raise ValueError(
                f"input {k} ({t.name!r}) has shape {list(t.shape)}; got {list(arr.shape)}"
            )
        if arr.dtype != view.dtype:
            if arr.dtype.kind in "iub" and view.dtype.kind in "iu":
                info = np.iinfo(view.dtype)
                if arr.size and (arr.min() < info.min or arr.max() > info.max):
                    raise ValueError(f"input {k} values lie outside {view.dtype}'s range")
            elif not (arr.dtype.kind == "f" and view.dtype.kind == "f"):
                raise ValueError(f"input {k} ({t.name!r}) is {view.dtype}; got {arr.dtype}")
        view[...] = arr.reshape(view.shape)
