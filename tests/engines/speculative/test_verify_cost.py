"""v(K) on the tiny model: one ratio per K asked (duplicates once, in order), none below 1."""

from __future__ import annotations

from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.speculative.verify_cost import verify_cost_ratios


def test_one_ratio_per_k_never_below_one():
    model, _ = tiny_model()
    v = verify_cost_ratios(model, [4, 1, 4, 2], repeats=1)
    assert list(v) == [1, 2, 4]
    assert all(r >= 1.0 for r in v.values())
