"""Native linears called from Python made visible to torch.profiler: a native linear is a
ctypes call the profiler does not see (the lm_head after the native decoder's one call; every
linear of a step the decoder does not take, such as a long prefill).

`spanned_model(model)` is a model sharing every weight of `model` whose native linears each
run inside a profiler span "native::<name>" (qkv, o, gate_up, down, lm_head) while
`recording_calls()` is open, appending its (flops, bytes) to the list that yields
(`native_ops.linear_cost` of its shape); outside, the call is the linear's own. The native
decoder still takes the layers (a spanned linear hands out its `native_operand`). The shared
model itself is left as it is (other labs hold it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch

from inferlab.engines.kernels.decoder import LinearShape, operand_bytes
from inferlab.engines.model.llama import Llama
from inferlab.engines.profile.native_ops import linear_cost
from inferlab.engines.profile.step_ops import OP_SPAN_PREFIX

_recording = threading.local()  # .sink: the list a recording thread's calls go to


@contextmanager
def recording_calls() -> Iterator[list[tuple[float, float]]]:
    """Inside, every spanned call this thread makes appends its (flops, bytes)."""
    previous = getattr(_recording, "sink", None)
    sink: list[tuple[float, float]] = []
    _recording.sink = sink
    try:
        yield sink
    finally:
        _recording.sink = previous


class SpannedLinear:
    """A native linear run inside the span `native::<name>` while recording (see above)."""

    def __init__(self, linear, name: str, shape: LinearShape) -> None:
        self.linear, self.span, self.shape = linear, OP_SPAN_PREFIX + name, shape

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        sink = getattr(_recording, "sink", None)
        if sink is None:
            return self.linear(x)
        with torch.profiler.record_function(self.span):
            y = self.linear(x)
        sink.append(linear_cost(x.reshape(-1, x.shape[-1]).shape[0], self.shape))
        return y

    def __getattr__(self, name: str):
        return getattr(self.linear, name)


LAYER_LINEARS = ("qkv", "o", "gate_up", "down")


def spanned(linear, name: str):
    """`linear` spanned where it is a native linear, else itself."""
    describe = getattr(linear, "native_operand", None)
    op = describe() if describe is not None else None
    if op is None:
        return linear
    return SpannedLinear(linear, name,
                         LinearShape(op.kind, op.out_features, op.in_features,
                                     operand_bytes(op)))


def spanned_model(model: Llama) -> Llama:
    """A model over `model`'s weights with its native linears spanned (see the docstring)."""
    layers = [replace(lw, **{n: spanned(getattr(lw, n), n) for n in LAYER_LINEARS
                             if getattr(lw, n) is not None})
              for lw in model.layers]
    return Llama(model.config, model.embed, layers, model.final_norm,
                 lm_head=spanned(model.lm_head, "lm_head"), kernels=model.kernel_path)
