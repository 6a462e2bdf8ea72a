"""The fitted cost model: exact polynomials recovered; a real probe's own points (measured
against llama-cpp-python on SmolLM2, n_batch 1) reproduced within a tolerance; too few points
refused by name."""

from __future__ import annotations

import pytest

from inferlab.engines.serve.fitted_cost import FittedCost

# TTFT (s) at prompt lengths and mean token gaps (s) at contexts, measured here 2026-12 (two
# runs per length, llama-cpp-python 0.3.36, SmolLM2 Q4_1, one thread, a shared 2-core VM)
PROBE_TTFT = [(16, 0.266), (16, 0.287), (64, 0.996), (64, 0.886), (128, 1.828),
              (128, 2.008), (256, 3.922), (256, 3.676)]
PROBE_GAP = [(24, 0.0142), (24, 0.0168), (72, 0.0141), (72, 0.0137), (136, 0.0141),
             (136, 0.0172), (264, 0.0152), (264, 0.0161)]


def test_exact_polynomials_are_recovered():
    prefill = [(n, 0.05 + 0.012 * n + 3e-6 * n * n) for n in (8, 40, 100, 300)]
    decode = [(c, 0.011 + 2e-5 * c) for c in (20, 200, 900)]
    cost = FittedCost.fit(prefill, decode)
    assert cost.prefill_coef == pytest.approx((0.05, 0.012, 3e-6), rel=1e-7)
    assert cost.decode_coef == pytest.approx((0.011, 2e-5), rel=1e-7)
    assert cost.prefill_s(100) == pytest.approx(0.05 + 1.2 + 0.03)
    assert cost.decode_s(500) == pytest.approx(0.021)


def test_a_real_probe_is_reproduced_by_its_own_fit():
    cost = FittedCost.fit(PROBE_TTFT, PROBE_GAP)
    for n, ttft_s in PROBE_TTFT:  # the two runs at a length differ by up to 12 %
        assert cost.prefill_s(n) == pytest.approx(ttft_s, rel=0.15)
    for ctx, gap_s in PROBE_GAP:
        assert cost.decode_s(ctx) == pytest.approx(gap_s, rel=0.15)
    # the same points, averaged per length, are reproduced closer
    means = {}
    for n, t in PROBE_TTFT:
        means.setdefault(n, []).append(t)
    for n, ts in means.items():
        assert cost.prefill_s(n) == pytest.approx(sum(ts) / len(ts), rel=0.06)


def test_residuals_are_relative_so_short_prompts_count():
    """A short prompt's 0.1 s against long prompts' seconds: an absolute fit would give its
    error away; the relative one keeps it within a few per cent and the constant positive."""
    points = [(4, 0.104), (32, 0.564), (96, 1.735), (192, 3.804), (4, 0.099), (32, 0.676),
              (96, 2.667), (192, 4.1)]
    cost = FittedCost.fit(points, [(20, 0.02), (200, 0.021)])
    assert cost.prefill_coef[0] > 0
    assert cost.prefill_s(4) == pytest.approx(0.1015, rel=0.1)


def test_linear_fits_and_the_floor_at_zero():
    cost = FittedCost.fit([(10, 0.2), (20, 0.3)], [(5, 0.01)], prefill_terms=2,
                          decode_terms=1)
    assert cost.prefill_coef == pytest.approx((0.1, 0.01))
    assert cost.decode_coef == pytest.approx((0.01,))
    assert FittedCost((-1.0, 0.001), (0.01,)).prefill_s(10) == 0.0


@pytest.mark.parametrize("prefill, decode, message", [
    ([(10, 0.2), (20, 0.3)], [(5, 0.01), (9, 0.01)], "prefill points: 3 coefficients need"),
    ([(10, 0.2), (10, 0.3), (20, 0.4)], [(5, 0.01), (9, 0.01)], "3 distinct x values"),
    ([(10, 0.2), (20, float("nan")), (30, 0.4)], [(5, 0.01), (9, 0.01)], "finite"),
    ([(10, 0.2), (20, 0.0), (30, 0.4)], [(5, 0.01), (9, 0.01)], "times > 0"),
    ([(10, 0.2), (20, 0.3), (30, 0.4)], [(5, 0.01)], "decode points: 2 coefficients"),
])
def test_too_few_or_bad_points_are_refused_by_name(prefill, decode, message):
    with pytest.raises(ValueError, match=message):
        FittedCost.fit(prefill, decode)
