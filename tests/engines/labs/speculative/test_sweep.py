"""Speedup against K, measured in one run: one point per K, outputs equal to plain greedy
decoding, the model's prediction from the run's own α and cost ratio; the bench's rows are
the same measurement."""

from __future__ import annotations

import pytest

from inferlab.engines.hardware.cancel import Cancelled
from inferlab.engines.labs.speculative.settings import speculative_defaults
from inferlab.engines.labs.speculative.sweep import k_sweep
from inferlab.engines.speculative.statistics import (
    expected_tokens_per_forward,
    speedup_model_drafted,
)


@pytest.mark.parametrize("drafter", ["tiny", "quant:int8"])
def test_a_sweep_on_the_tiny_model(drafter):
    settings = dict(speculative_defaults(), model="tiny", drafter=drafter, max_tokens=24)
    seen = []
    sweep = k_sweep(settings, ks=(1, 3), progress=lambda f, m="": seen.append(f))
    assert [p.k for p in sweep.points] == [1, 3]
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
    for p in sweep.points:
        assert p.outputs_equal  # greedy speculative == greedy target
        assert p.cost_ratio > 0 and p.speedup_wall > 0
        assert p.theory_tokens_per_forward == pytest.approx(
            expected_tokens_per_forward(p.alpha, p.k))
        assert p.verify_cost_ratio >= 1.0  # v(K), timed before the sweep
        assert 1 <= p.tokens_per_target_forward <= p.k + 1
    assert sweep.model == "tiny" and sweep.new_tokens == 24


def test_a_sweep_stops_when_asked():
    settings = dict(speculative_defaults(), model="tiny", max_tokens=8)
    with pytest.raises(Cancelled):
        k_sweep(settings, ks=(1, 2), should_stop=lambda: True)


def test_the_bench_rows():
    from inferlab.engines.labs.speculative.bench import run_speculative_bench

    out = run_speculative_bench(["Name three colours."], new_tokens=8, drafters=("ngram",),
                                ks=(2,), dtype="fp32", model_name="tiny", tree_widths=(1, 3))
    chain, tree = out["results"]
    for row in (chain, tree):
        assert row["drafter"] == "ngram" and row["k"] == 2 and row["outputs_equal"]
        assert row["speedup_wall"] > 0
    assert (chain["tree_width"], tree["tree_width"]) == (1, 3)
    assert out["best"] in (chain, tree) and out["model"] == "tiny"
    for row in (chain, tree):  # the theory over what was drafted, at most K + 1
        assert 1.0 <= row["theory_drafted_tokens_per_forward"] <= row["k"] + 1
    assert chain["theory_drafted_tokens_per_forward"] <= chain["theory_tokens_per_forward"]
    auto, hf = out["adaptive"], out["hf_heuristic_k"]
    for row in (auto, hf):
        assert row["k"] == "auto" and row["outputs_equal"] and row["speedup_wall"] > 0
        assert 0 <= row["k_chosen_mean"] <= 8 and 0 <= row["plain_step_frac"] <= 1
    assert hf["plain_step_frac"] == 0  # the heuristic always drafts
    assert out["adaptive_vs_hf_heuristic_k"] == pytest.approx(
        auto["speedup_wall"] / hf["speedup_wall"])


def test_the_bench_reports_each_prompt_group():
    from inferlab.engines.labs.speculative.bench import run_speculative_bench

    groups = {"grounded": ["Repeat: red green blue red green blue"], "open": ["Hello?", "Hi."]}
    out = run_speculative_bench(groups, new_tokens=6, drafters=("ngram",), ks=(2,),
                                dtype="fp32", model_name="tiny")
    assert out["groups"] == ["grounded", "open"] and "results" not in out
    for name, n in (("grounded", 1), ("open", 2)):
        group = out[name]
        assert group["prompts"] == n and len(group["results"]) == 1
        assert group["best"] == group["results"][0] and group["adaptive"]["k"] == "auto"
        assert all(r["outputs_equal"] for r in (*group["results"], group["adaptive"]))
    assert "skip_auto" not in out["grounded"]  # the open group's (the tiny target has no
    assert "intermediate" in out["open"]["skip_auto"]["error"]  # intermediate layer)


def test_the_bench_skip_auto_figures_beside_layerskip_at_the_same_cost():
    from inferlab.engines.labs.speculative.bench import _skip_auto_figures
    from inferlab.engines.labs.speculative.sweep import plain_decode
    from inferlab.engines.model.tiny import tiny_model

    model, tok = tiny_model(n_layers=5)
    ids = [tok.encode_prompt("Hello there.")]
    out = _skip_auto_figures(model, tok, ids, 6, 1, lambda: [plain_decode(model, ids, 6)])
    assert out["drafter"] == out["row"]["drafter"] and out["drafter"].startswith("skip:")
    assert out["layers_kept"] == 5 - len(out["skipped"])
    same = out["layerskip_same_cost"]
    assert same["drafter"] == f"layerskip:{out['layers_kept']}" and same["k"] == out["k"]
    assert out["row"]["outputs_equal"] and same["outputs_equal"]
    assert out["alpha"] == out["row"]["alpha"] and out["speedup_wall"] > 0
    assert out["skipped"] in [p["skipped"] for p in out["search_path"]]


def test_a_sweep_of_trees_reads_back_with_its_width():
    from inferlab.engines.labs.speculative.sweep_records import sweep_from_dict, sweep_to_dict

    settings = dict(speculative_defaults(), model="tiny", max_tokens=12, tree_width=3)
    sweep = k_sweep(settings, ks=(2,))
    assert sweep.points[0].tree_width == 3 and sweep.points[0].outputs_equal
    d = sweep_to_dict(sweep)
    assert sweep_from_dict(d, "w") == sweep
    del d["points"][0]["tree_width"]  # an older snapshot: a chain
    assert sweep_from_dict(d, "w").points[0].tree_width == 1
    del d["points"][0]["theory_drafted_tokens_per_forward"]  # and before the drafted theory
    assert sweep_from_dict(d, "w").points[0].theory_drafted_tokens_per_forward is None
    d["points"][0]["tree_width"] = 0
    with pytest.raises(ValueError, match=r"w.points\[0\].tree_width: expected an integer in "
                                         r"1..64, got 0"):
        sweep_from_dict(d, "w")


def test_plain_and_speculative_decodes_stop_at_the_same_stop_token():
    """The bench's decodes end at the model's end of turn, as a request does: a stop token met
    at position j ends both the plain and the speculative decode there, with equal outputs."""
    from inferlab.engines.labs.speculative.sweep import measure_k, plain_decode
    from inferlab.engines.model.tiny import tiny_model

    model, tok = tiny_model()
    ids = [tok.encode_prompt("Hello there.")]
    (whole,) = plain_decode(model, ids, 16).outputs
    j = 5
    stop = whole[j]
    cut = whole[: whole.index(stop)]  # the first occurrence ends the decode
    plain_s, refs, _ = plain_decode(model, ids, 16, [stop])
    assert refs == [cut]
    point = measure_k(model, tok, "ngram", 3, ids, 16, [plain_s], refs, stop_token_ids=[stop])
    assert point.outputs_equal and point.emitted_tokens == len(cut)
    free = measure_k(model, tok, "ngram", 3, ids, 16, [plain_s], [whole])
    assert free.outputs_equal and free.emitted_tokens == 16
    # K is capped by the tokens left: a length limit cuts no step, so the forwards' yield is
    # what was emitted; a stop token can cut the last step, so the yield is at least that
    assert free.yield_per_target_forward == pytest.approx(free.tokens_per_target_forward)
    assert point.yield_per_target_forward >= point.tokens_per_target_forward
    row = point.figures()
    assert row["theory_gap"] == pytest.approx(
        point.yield_per_target_forward / point.theory_drafted_tokens_per_forward - 1)


def test_the_predicted_speedup_is_over_the_drafts_made_with_the_given_v():
    """predicted_speedup = sum_i E(k_i) / sum_i (k_i c + v(k_i)) over the steps' own draft
    lengths (recomputed from the same greedy decode), with the v(K) it is given; v = 1 where
    none is given."""
    from inferlab.engines.labs.speculative.drafters import make_drafter
    from inferlab.engines.labs.speculative.sweep import measure_k, plain_decode
    from inferlab.engines.model.tiny import tiny_model
    from inferlab.engines.speculative.decoder import SpeculativeDecoder
    from inferlab.engines.speculative.sampling import GREEDY

    model, tok = tiny_model()
    ids = [tok.encode_prompt("Hello there.")]
    plain_s, refs, prefill_s = plain_decode(model, ids, 12)
    assert 0 < prefill_s < plain_s
    v = {1: 1.1, 2: 1.2, 3: 1.5}
    point = measure_k(model, tok, "ngram", 3, ids, 12, [plain_s], refs, verify_costs=v,
                      prefill_s=prefill_s)
    drafter = make_drafter("ngram", model, tok, GREEDY, 0, model.config.max_position)
    run = SpeculativeDecoder(model, drafter, k=3, tokenizer=tok).generate(list(ids[0]), 12)
    lengths = [len(s.drafted) for s in run.steps]
    assert point.predicted_speedup == pytest.approx(
        speedup_model_drafted(point.alpha, lengths, point.cost_ratio, v))
    assert point.verify_cost_ratio == 1.5
    # the wall clock's prediction: the prefill share p of plain_s is not sped up
    p = prefill_s / plain_s
    assert point.predicted_speedup_wall == pytest.approx(
        1 / (p + (1 - p) / point.predicted_speedup))
    assert point.figures()["predicted_speedup_wall"] == point.predicted_speedup_wall
    free = measure_k(model, tok, "ngram", 3, ids, 12, [plain_s], refs)
    assert free.prefill_s is None and free.predicted_speedup_wall is None
    assert free.verify_cost_ratio == 1.0 and free.predicted_speedup == pytest.approx(
        speedup_model_drafted(free.alpha, lengths, free.cost_ratio, dict.fromkeys(v, 1.0)))


def test_the_lab_bench_asks_for_the_eagle_rows(monkeypatch):
    """`bench speculative` (the lab's bench) passes its EAGLE Ks on: each group's `eagle`
    rows come from them (a head found, they are measured; none asked, none are)."""
    from inferlab.engines.labs.speculative import bench

    seen = {}
    monkeypatch.setattr(bench, "run_speculative_bench", lambda *a, **kw: seen.update(kw))
    bench.run_speculative_lab_bench()
    assert seen["eagle_ks"] == bench.EAGLE_KS
    bench.run_speculative_lab_bench(eagle_ks=(2,))
    assert seen["eagle_ks"] == (2,)
