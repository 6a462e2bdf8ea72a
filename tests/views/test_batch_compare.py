"""The Compare and Rate sweep tabs, offscreen, on hand-made runs: legends name what differs."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.batching.compare_records import PolicyRun, SweepPoint
from inferlab.views.batch_compare import PolicyCompareView, RateSweepView


def _run(cache: str, hit_rate: float) -> PolicyRun:
    metrics = {"ttft_s": {"p50": 0.01, "p99": 0.02}, "output_tokens_per_s": 100.0,
               "prefix_hit_rate": hit_rate, "preemptions": 0}
    return PolicyRun("continuous", metrics, (0.01, 0.02), (0.005,), cache)


def test_hash_vs_radix_runs_are_named_by_their_cache(qtbot):
    view = PolicyCompareView()
    qtbot.addWidget(view)
    view.set_variants({"prefix_cache": "hash"}, {"prefix_cache": "radix", "schedule": "lpm"})
    assert view.variants() == ({"policy": "static", "prefix_cache": "hash", "schedule": "fcfs"},
                               {"policy": "continuous", "prefix_cache": "radix",
                                "schedule": "lpm"})
    view.show_runs([_run("hash", 0.5), _run("radix", 0.6)])
    names = [item.opts["name"] for item in view.ttft_plot.getPlotItem().listDataItems()]
    assert names == ["A: block hashes", "B: radix tree"]
    rows = {view.table.item(r, 0).text(): (view.table.item(r, 1).text(),
                                           view.table.item(r, 3).text())
            for r in range(view.table.rowCount())}
    assert rows["Prefix hit rate"] == ("50.0%", "1.2×")


def test_a_sweep_draws_one_curve_per_variant(qtbot):
    view = RateSweepView()
    qtbot.addWidget(view)

    def point(rate, cache):
        return SweepPoint("continuous", rate, 10 * rate, 0.1, 0.2, 0.01, 0.02, rate, cache)

    view.show_points([point(1, "hash"), point(1, "radix"), point(2, "hash"), point(2, "radix")],
                     1.0, 0.05)
    curves = [c for c in view.ttft_plot.getPlotItem().listDataItems() if c.opts.get("name")]
    assert [c.opts["name"] for c in curves] == ["block hashes", "radix tree"]
    assert [len(c.getData()[0]) for c in curves] == [2, 2]
    assert "block hashes: knee at <b>2 req/s</b>" in view.note.text()
    assert view.note.text().count("knee at") == 2


@pytest.mark.parametrize("runs", [(), ([_run("none", 0.0)])])
def test_fewer_runs_draw_without_error(qtbot, runs):
    view = PolicyCompareView()
    qtbot.addWidget(view)
    view.show_runs(list(runs))
    assert view.table.rowCount() > 0
