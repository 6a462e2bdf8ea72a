"""The bytes each engine counts equal the closed forms exactly, for every shape tried."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.attention.executions import closed_form, make_engine
from inferlab.engines.attention.step import EXECUTIONS, SPLIT_K, TILED
from inferlab.engines.attention.traffic import (
    naive_traffic,
    tiled_on_chip_bytes,
    tiled_traffic,
    tiles_for_on_chip,
)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 70), d=st.integers(1, 24), br=st.integers(1, 40),
       bc=st.integers(1, 40), heads=st.integers(1, 3), causal=st.booleans(),
       execution=st.sampled_from(EXECUTIONS))
def test_counted_bytes_equal_the_closed_form(n, d, br, bc, heads, causal, execution):
    q, k, v = (torch.zeros(heads, n, d) for _ in range(3))
    engine = make_engine(execution, q, k, v, br, bc, causal)
    steps = 0
    while not engine.done:
        last = engine.step()
        steps += 1
    assert steps == engine.steps_total == last.steps_total  # the count without the walk
    assert next(engine._plan, None) is None
    form = closed_form(execution, n, d, br, bc, causal, 4, heads)
    assert (engine.bytes_read, engine.bytes_written, engine.flops) == \
        (form.bytes_read, form.bytes_written, form.flops)
    assert (last.bytes_read, last.bytes_written) == (form.bytes_read, form.bytes_written)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), d=st.integers(1, 16), br=st.integers(1, 30),
       bc=st.integers(1, 30))
def test_tiled_peak_working_set_is_the_full_tiles(n, d, br, bc):
    engine = make_engine(TILED, *(torch.zeros(n, d) for _ in range(3)), br, bc)
    engine.run()
    assert engine.peak_on_chip_bytes == tiled_on_chip_bytes(min(br, n), min(bc, n), d, 4)


def test_the_closed_forms_substituted_by_hand():
    # N = 1024, d = 64, Br = Bc = 128, fp32
    naive = naive_traffic(1024, 64, 4)
    assert naive.bytes_read == 4 * (3 * 1024 * 64 + 2 * 1024**2)
    assert naive.bytes_written == 4 * (2 * 1024**2 + 1024 * 64)
    tiled = tiled_traffic(1024, 64, 128, 128, False, 4)
    assert tiled.bytes_read == 4 * (1024 * 64 + 8 * 2 * 1024 * 64)  # ⌈N/Br⌉ = 8 passes
    assert tiled.bytes_written == 4 * 1024 * 64
    causal = tiled_traffic(1024, 64, 128, 128, True, 4)  # Q tile i reads (i+1)·128 keys
    assert causal.bytes_read == 4 * (1024 * 64 + 2 * 64 * 128 * sum(range(1, 9)))
    assert naive.flops == tiled.flops == 4 * 1024**2 * 64


def test_tiled_traffic_falls_as_the_q_tile_grows():
    reads = [tiled_traffic(4096, 64, br, 64, False, 4).bytes_read for br in (16, 64, 256)]
    assert reads[0] > reads[1] > reads[2]
    assert tiled_traffic(4096, 64, 64, 64, False, 4).bytes_moved < \
        naive_traffic(4096, 64, 4).bytes_moved


def test_split_k_reads_the_context_once():
    engine = make_engine(SPLIT_K, *(torch.zeros(100, 8) for _ in range(3)), 1, 30)
    engine.run()
    splits = math.ceil(100 / 30)
    assert engine.bytes_read == 4 * (splits * 8 + 2 * 100 * 8 + splits * 10)
    assert engine.steps_total == splits + 1


def test_tiles_for_an_on_chip_memory():
    # 100 KB of shared memory (an A100 SM's), d = 64, fp32: M = 25,600 floats, Bc = 100
    assert tiles_for_on_chip(100 * 1024, 64, 4) == (64, 100)
    assert tiles_for_on_chip(8, 64, 4) == (1, 1)
