"""Under uniform random routing the distinct experts a batch touches average
E·(1 − (1 − k/E)^B) (roofline.memory.experts_touched), within sampling error."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.labs.moe.bench import distinct_vs_formula
from inferlab.engines.labs.moe.uniform import uniform_routing
from inferlab.engines.model.moe import experts_touched as distinct
from inferlab.engines.roofline.memory import experts_touched

DRAWS = 300


@st.composite
def cases(draw):
    e = draw(st.integers(1, 300))
    return e, draw(st.integers(1, min(e, 16))), draw(st.integers(1, 128)), draw(st.integers(0, 99))


@settings(max_examples=30, deadline=None)
@given(cases())
def test_measured_distinct_experts_match_the_formula(case):
    e, k, b, seed = case
    gen = torch.Generator().manual_seed(seed)
    counts = []
    for _ in range(DRAWS):
        ids = uniform_routing(e, k, b, gen)
        assert all(len(set(row)) == k for row in ids.tolist())  # k distinct experts a token
        counts.append(distinct(ids))
    assert all(k <= c <= min(e, b * k) for c in counts)
    mean = sum(counts) / DRAWS
    var = sum((c - mean) ** 2 for c in counts) / (DRAWS - 1)
    # five standard errors, and the rule of three for a miss too rare to have been drawn
    # (an expected 3 / DRAWS experts left out can show as no draw leaving any out)
    assert abs(mean - experts_touched(e, k, b)) <= 5 * math.sqrt(var / DRAWS) + 3 / DRAWS


def test_the_bench_figure_is_within_its_goal():
    got = distinct_vs_formula(draws=500)
    assert abs(got["distinct_experts_measured_vs_formula"] - 1.0) < 0.05
    assert len(got["distinct_experts_ratios"]) == 16
