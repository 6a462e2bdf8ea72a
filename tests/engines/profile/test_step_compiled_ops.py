"""A compiled region seen kernel by kernel: the profiler tree torch.compile records (dynamo's
region and guard lookup, AOTAutograd's prologue, inductor's graph call holding its generated
kernels and extern aten ops), built by hand as torch 2.13 records it, gives the kernels and
the aten ops as the step's ops, and the wrappers' time as time between ops."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from inferlab.engines.profile.step_ops import is_fused_kernel, is_marker, step_ops
from inferlab.engines.profile.step_split import Roof, split_step


@dataclass
class Range:
    start: float  # µs
    end: float

    def elapsed_us(self) -> float:
        return self.end - self.start


@dataclass
class Event:
    """What step_ops reads of a torch FunctionEvent."""

    name: str
    start: float
    end: float
    children: list = field(default_factory=list)
    user: bool = False
    input_shapes: list = field(default_factory=list)
    input_dtypes: list = field(default_factory=list)
    flops: int = 0
    thread: int = 1

    @property
    def time_range(self) -> Range:
        return Range(self.start, self.end)

    @property
    def cpu_children(self) -> list:
        return self.children

    @property
    def is_user_annotation(self) -> bool:
        return self.user


def compiled_step() -> Event:
    """An eager op, then a compiled region [10, 90] µs whose graph call [30, 85] runs a fused
    kernel, an mm (8×64 by 64×96) and another fused kernel; a graph break's aten::item."""
    mm = Event("aten::mm", 45, 60, [Event("aten::resolve_conj", 46, 47)],
               input_shapes=[[8, 64], [64, 96]], input_dtypes=["float", "float"])
    call = Event("## Call CompiledFxGraph fabc ##", 30, 85, [
        Event("graph_4_cpp_fused_add_mean_mul_pow_rsqrt_0", 32, 40),
        mm,
        Event("graph_4_cpp_fused_mul_silu_slice_3", 62, 70),
    ], user=True)
    region = Event("Torch-Compiled Region: 0/0", 10, 90, [
        Event("Pregraph bytecode", 12, 14),
        Event("AOTDispatcher Runtime Wrapper Prologue", 15, 20),
        Event("TorchDynamo Cache Lookup", 21, 25),
        call,
        Event("aten::item", 86, 88),
    ])
    return Event("inferlab::step", 0, 100, [
        Event("aten::index_select", 1, 6, [Event("aten::empty", 1.5, 2)]),
        Event("TorchDynamo Cache Lookup", 7, 9),
        region,
    ], user=True)


def test_a_compiled_region_is_seen_kernel_by_kernel():
    ops = step_ops(compiled_step())
    assert [op.name for op in ops] == [
        "aten::index_select", "graph_4_cpp_fused_add_mean_mul_pow_rsqrt_0", "aten::mm",
        "graph_4_cpp_fused_mul_silu_slice_3", "aten::item"]
    assert [op.start_s * 1e6 for op in ops] == pytest.approx([1, 32, 45, 62, 86])
    assert [op.dur_s * 1e6 for op in ops] == pytest.approx([5, 8, 15, 8, 2])
    by_name = {op.name: op for op in ops}
    assert by_name["aten::mm"].flops == 2 * 8 * 64 * 96
    assert by_name["aten::mm"].bytes == 4 * (8 * 64 + 64 * 96 + 8 * 96)
    fused = [op for op in ops if is_fused_kernel(op.name)]
    assert len(fused) == 2 and all(op.flops is None and op.bytes is None for op in fused)


def test_the_wrappers_time_is_between_ops():
    ops = step_ops(compiled_step())
    split = split_step(100e-6, ops, Roof("cpu", 1e12, 1e12))
    # ops cover 5 + 8 + 15 + 8 + 2 = 38 µs of the 100: guards, prologue, the graph call's own
    # Python and the gaps are the other 62
    assert split.busy_s == pytest.approx(38e-6)
    assert split.between_ops_s == pytest.approx(62e-6)


def test_markers_and_kernel_names():
    assert is_marker(Event("Torch-Compiled Region: 6/1", 0, 1))
    assert is_marker(Event("anything a user spans", 0, 1, user=True))
    assert not is_marker(Event("native::lm_head", 0, 1, user=True))
    assert not is_marker(Event("aten::mm", 0, 1))
    assert is_fused_kernel("graph_0_cpp_fused_add_cos_sin_0")
    assert is_fused_kernel("cpp_fused_mul_0")
    assert not is_fused_kernel("aten::mm") and not is_fused_kernel("native::qkv")
