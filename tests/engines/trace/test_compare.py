"""Comparing two snapshots: hand-worked figure rows, a snapshot against itself, the settings
and host facts that differ, labs on one side only, bounds, and fuzzed pairs."""

from __future__ import annotations

import random

import pytest

from inferlab.engines.trace.compare import (
    Headline,
    compare_snapshots,
    failed_bounds,
    flatten_numbers,
    parse_bound,
)
from inferlab.engines.trace.snapshot import (
    SnapshotError,
    lab_section,
    make_snapshot,
    snapshot_from_dict,
    snapshot_to_dict,
)
from tests.fuzz import mutate_value, run_cases, sampled_paths


def snap(labs: dict, host: dict | None = None, version: str = "0.1.0"):
    return make_snapshot(version, host or {"cpu": "x86", "torch": "2.13.0"}, [], labs,
                         created_utc="2026-12-02T00:00:00+00:00")


def batching(tokens_per_s: float, ttft_s: float, policy: str = "continuous", hit=True):
    return lab_section({"policy": policy, "requests": 32},
                       {"series": [1, 2, 3]},
                       {"output_tokens_per_s": tokens_per_s,
                        "latency": {"ttft_p50_s": ttft_s, "samples": [0.1, 0.2]},
                        "finished_all": hit})


def test_figure_rows_by_hand_moved_most_first():
    a = snap({"batching": batching(100.0, 0.5)})
    b = snap({"batching": batching(150.0, 0.45)})
    c = compare_snapshots(a, b)
    assert [(r.figure, r.a, r.b) for r in c.rows] == [
        ("output_tokens_per_s", 100.0, 150.0),  # |log 1.5| > |log 0.9|
        ("latency.ttft_p50_s", 0.5, 0.45)]
    first, second = c.rows
    assert first.b_minus_a == 50.0 and first.b_over_a == 1.5
    assert second.b_minus_a == pytest.approx(-0.05) and second.b_over_a == pytest.approx(0.9)
    assert c.settings == () and c.host == () and c.labs == ("batching",)


def test_a_snapshot_against_itself_moves_nothing():
    a = snap({"batching": batching(123.0, 0.25), "kv": lab_section({}, {}, {"hit_rate": 0.4})})
    c = compare_snapshots(a, a)
    assert len(c.rows) == 3
    assert all(r.b_over_a == 1.0 and r.b_minus_a == 0.0 for r in c.rows)
    assert c.settings == () and c.host == () and not c.only_in_a and not c.only_in_b


def test_settings_host_and_version_that_differ_are_named():
    a = snap({"batching": batching(1.0, 1.0)}, {"cpu": "avx2", "torch": "2.13.0"})
    b = snap({"batching": batching(2.0, 1.0, policy="static")},
             {"cpu": "avx512", "torch": "2.13.0"}, version="0.2.0")
    c = compare_snapshots(a, b)
    assert [(d.where, d.name, d.a, d.b) for d in c.settings] == [
        ("batching", "policy", "continuous", "static")]
    assert [(d.name, d.a, d.b) for d in c.host] == [("app_version", "0.1.0", "0.2.0"),
                                                   ("cpu", "avx2", "avx512")]


def test_labs_on_one_side_only_and_figures_on_one_side_only():
    a = snap({"batching": batching(1.0, 1.0), "kv": lab_section({}, {}, {"hit_rate": 0.5})})
    b = snap({"batching": lab_section({}, {}, {"output_tokens_per_s": 3.0, "new": 2.0}),
              "quant": lab_section({}, {}, {"ppl": 9.0})})
    c = compare_snapshots(a, b)
    assert c.only_in_a == ("kv",) and c.only_in_b == ("quant",)
    rows = {r.figure: r for r in c.rows}
    assert rows["new"].a is None and rows["new"].b_over_a is None
    assert rows["latency.ttft_p50_s"].b is None
    assert c.rows[0].figure == "output_tokens_per_s"  # rows with a ratio first


def test_a_zero_a_has_a_difference_but_no_ratio():
    c = compare_snapshots(snap({"kv": lab_section({}, {}, {"evicted": 0})}),
                          snap({"kv": lab_section({}, {}, {"evicted": 4})}))
    assert c.rows[0].b_minus_a == 4.0 and c.rows[0].b_over_a is None


def test_flatten_keeps_numbers_only():
    assert flatten_numbers({"a": 1, "b": True, "c": [1, 2], "d": {"e": 2.5, "f": "x"},
                            "g": None}) == {"a": 1.0, "d.e": 2.5}


@pytest.mark.parametrize("text, fails", [
    ("output_tokens_per_s < 0.95", False), ("output_tokens_per_s < 1.6", True),
    ("batching:output_tokens_per_s >= 1.5", True), ("latency.ttft_p50_s > 0.95", False),
    ("latency.ttft_p50_s <= .9", True),
])
def test_bounds_on_b_over_a(text, fails):
    c = compare_snapshots(snap({"batching": batching(100.0, 0.5)}),
                          snap({"batching": batching(150.0, 0.45)}))
    assert bool(failed_bounds(c, [parse_bound(text)])) == fails


def test_a_bound_on_no_figure_fails_and_a_malformed_one_is_refused():
    c = compare_snapshots(snap({"batching": batching(1.0, 1.0)}),
                          snap({"batching": batching(1.0, 1.0)}))
    assert "no figure 'nope'" in failed_bounds(c, [parse_bound("nope < 1")])[0]
    for bad in ("x <", "x = 1", "< 1", "x < one", "x < 1; rm"):
        with pytest.raises(ValueError, match="expected 'FIGURE < NUMBER'"):
            parse_bound(bad)


def test_fuzzed_pairs_never_crash():
    base = snapshot_to_dict(snap({"batching": batching(100.0, 0.5),
                                  "kv": lab_section({"block": 16}, {"t": [[1]]},
                                                    {"hit_rate": 0.5, "n": {"x": 1}})}))
    original = snapshot_from_dict(base)
    rng = random.Random(20261202)
    paths = sampled_paths(base)

    def case(doc):
        def call():
            other = snapshot_from_dict(doc)
            for a, b in ((original, other), (other, original), (other, other)):
                compare_snapshots(a, b).to_dict()
        return call

    cases = []
    for _ in range(400):
        label, doc = mutate_value(base, rng, paths)
        cases.append((label, case(doc)))
    result = run_cases(cases, allowed=(SnapshotError,))
    assert not result.failures, result.failures[:3]
    assert result.ok > 50  # most mutations still read: the comparison really ran on them


HEADLINES = (Headline("output_tokens_per_s", "output throughput", "tokens/s", "higher"),
             Headline("latency.ttft_p50_s", "TTFT p50", "s", "lower"),
             Headline("nowhere_s", "a figure neither run wrote", "s", "lower"),
             Headline("perplexity.*", "perplexity", "", "lower"))


def served(tokens_per_s: float, ttft_s: float, iterations: int, ppl: dict) -> dict:
    return lab_section({}, {}, {"iterations": iterations, "perplexity": ppl,
                                "output_tokens_per_s": tokens_per_s,
                                "latency": {"ttft_p50_s": ttft_s}})


def test_headline_rows_come_first_in_their_order_marked_by_their_direction():
    # throughput down (worse), TTFT down (better), one scheme's perplexity up (worse), one
    # gone from B; `iterations` moved furthest but is no headline: it follows them
    a = snap({"batching": served(100.0, 0.5, 10, {"int8": 9.0, "int4": 12.0})})
    b = snap({"batching": served(90.0, 0.25, 40, {"int8": 9.9})})
    c = compare_snapshots(a, b, headlines={"batching": HEADLINES})
    assert [(r.figure, r.label, r.headline) for r in c.rows] == [
        ("output_tokens_per_s", "output throughput", True),
        ("latency.ttft_p50_s", "TTFT p50", True),  # "nowhere_s": in neither, no row
        ("perplexity.int8", "perplexity (int8)", True),
        ("perplexity.int4", "perplexity (int4)", True),
        ("iterations", None, False)]
    assert [r.verdict for r in c.rows] == ["worse", "better", "worse", "", ""]
    assert [r.ratio_text() for r in c.rows] == [
        "0.9000 ▼ worse", "0.5000 ▼ better", "1.1000 ▲ worse", "–", "4.0000 ▲"]
    assert c.rows[0].to_dict() == {
        "lab": "batching", "figure": "output_tokens_per_s", "a": 100.0, "b": 90.0,
        "b_minus_a": -10.0, "b_over_a": 0.9, "label": "output throughput",
        "unit": "tokens/s", "better": "higher", "headline": True}
    assert c.rows[-1].to_dict()["label"] is None and c.rows[-1].to_dict()["better"] is None
    # a lab with no headlines described: every row by movement, as before
    assert [r.figure for r in compare_snapshots(a, b).rows][:2] == \
        ["iterations", "latency.ttft_p50_s"]


def test_a_headline_wildcard_stands_for_one_name_part_and_a_direction_is_checked():
    h = Headline("roofs.*.peak_flops.*", "peak matmul", "FLOP/s", "higher")
    assert h.matches(["roofs.cpu.peak_flops.fp32", "roofs.cpu.bandwidth_bytes_per_s",
                      "roofs.cuda:0.peak_flops.bf16", "roofs.a.b.peak_flops.fp32"]) == [
        ("roofs.cpu.peak_flops.fp32", "peak matmul (cpu, fp32)"),
        ("roofs.cuda:0.peak_flops.bf16", "peak matmul (cuda:0, bf16)")]
    with pytest.raises(ValueError, match="better 'up'"):
        Headline("x", "x", better="up")
