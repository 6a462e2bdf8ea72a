"""The batching lab: the window shows it, it steps and runs to the end on the simulated clock,
exports a snapshot that reopens read-only, and `inferlab screenshot --lab batching` renders."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from inferlab.app.labs.batching import AUTO_STEPS
from inferlab.app.labs.registry import lab_spec, resolve
from inferlab.engines.labs.batching.records import BatchingSnapshot
from inferlab.engines.labs.batching.session import batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.trace.snapshot import read_snapshot
from inferlab.views.batching_view import BatchingView
from tests.app import lab_helpers, lab_sections
from tests.app.lab_helpers import wait_idle


def open_lab(qtbot, make_window, **settings):
    return lab_helpers.open_lab(qtbot, make_window, "batching", 60000, **settings)


def test_lab_steps_runs_exports_and_reopens_read_only(qtbot, make_window, tmp_path):
    window, lab = open_lab(qtbot, make_window, requests=40)
    assert window.current_lab() is lab
    assert len(lab.records) == AUTO_STEPS or lab.session.done
    n = len(lab.records)
    if not lab.session.done:
        lab.view.step_button.click()
        qtbot.waitUntil(lambda: len(lab.records) == n + 1, timeout=30000)
        wait_idle(qtbot, window)
    lab.view.run_button.click()
    qtbot.waitUntil(lambda: lab.session.done, timeout=60000)
    wait_idle(qtbot, window)
    lab.flush()
    view = lab.view
    assert [r.index for r in lab.records] == list(range(len(lab.records)))
    assert sum(len(r.finished) for r in lab.records) == 40
    assert view.iterations is lab.records and len(view.requests) == 40
    assert view.metrics_table.rowCount() == 4
    assert view.metrics_table.item(0, 0).text() == "TTFT (ms)"
    assert view.metrics_table.item(0, 3).text() != "—"
    assert "tok/s" in view.metrics_note.text() and "Preemptions" in view.metrics_note.text()
    assert "all 40 requests finished" in view.status.text()
    x_low, x_high = view.timeline.gantt.getViewBox().viewRange()[0]  # the whole run in view
    assert x_low <= lab.records[0].start_s and x_high >= lab.records[-1].end_s

    path = window.export_snapshot(tmp_path / "batching.json")
    raw = json.loads(path.read_text())
    section = raw["inferlab"]["labs"]["batching"]
    assert len(section["state"]["iterations"]) == len(lab.records)
    assert section["metrics"]["completed"] == 40
    names = [e.get("name", "") for e in raw["traceEvents"]]
    assert sum(n.startswith("iteration ") for n in names) == len(lab.records)

    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("batching")
    assert replay.read_only and not replay.view.step_button.isEnabled()
    assert list(replay.view.iterations) == lab.records
    assert replay.view.metrics_table.item(0, 3).text() == view.metrics_table.item(0, 3).text()
    assert replay.view.timeline.gantt.getViewBox().viewRange()[0][1] >= lab.records[-1].end_s
    timeline = replay.view.timeline  # a long read-out never widens the chart
    assert timeline.readout.text().startswith("dashed line: iteration ")
    assert timeline.minimumSizeHint().width() < timeline.width()
    replay.view.slider.setValue(0)  # replay an earlier iteration
    assert replay.view.index == 0 and replay.view.step_label.text().startswith("iteration 0 ")
    other.show_live()
    assert not replay.read_only


def test_a_new_policy_resets_the_run(qtbot, make_window):
    window, lab = open_lab(qtbot, make_window, requests=20)
    view = lab.view
    view.policy.setCurrentIndex(view.policy.findData("static"))
    qtbot.waitUntil(lambda: lab.session is not None and lab.session.settings["policy"]
                    == "static", timeout=60000)
    wait_idle(qtbot, window)
    assert lab.settings()["policy"] == "static"
    assert all(r.policy == "static" for r in lab.records)


def test_view_draws_nothing_then_records(qtbot):
    view = BatchingView()
    qtbot.addWidget(view)
    view.clear("nothing yet")
    assert view.metrics_table.item(0, 1).text() == "—"
    session = batching_session(dict(BATCHING_DEFAULTS, requests=5))
    while not session.done:
        session.step()
    view.draw(session.request_infos(), session.records, session.metrics())
    assert view.slider.maximum() == len(session.records) - 1


@pytest.mark.slow  # a whole-window screenshot
def test_screenshot_of_the_lab(capsys, tmp_path):
    from PySide6.QtGui import QImage

    from inferlab.app.cli import main

    png = tmp_path / "batching.png"
    assert main(["screenshot", "--lab", "batching", "--out", str(png)]) == 0
    image = QImage(str(png))
    assert (image.width(), image.height()) == (1280, 800)


def test_compare_and_sweep_run_in_a_worker_draw_and_reopen(qtbot, make_window, tmp_path):
    window, lab = open_lab(qtbot, make_window, requests=30)
    view = lab.view
    view.tabs.setCurrentWidget(view.compare)
    view.compare.set_variants({"policy": "static"}, {"policy": "continuous"})
    view.compare.button.click()
    assert not view.compare.button.isEnabled()  # busy while it runs
    qtbot.waitUntil(lambda: len(lab.comparison) == 2, timeout=60000)
    wait_idle(qtbot, window)
    assert view.compare.button.isEnabled()
    a, b = lab.comparison
    assert (a.policy, b.policy) == ("static", "continuous")
    assert a.metrics["completed"] == b.metrics["completed"] == 30
    table = view.compare.table
    assert table.item(0, 0).text() == "TTFT p50 (ms)" and table.item(0, 1).text() != "—"
    ttft_curves = view.compare.ttft_plot.getPlotItem().listDataItems()
    assert [len(c.getData()[0]) for c in ttft_curves] == [30, 30]

    view.sweep.low.setValue(2.0)
    view.sweep.high.setValue(20.0)
    view.sweep.points_spin.setValue(2)
    view.sweep.button.click()
    qtbot.waitUntil(lambda: len(lab.sweep_points) == 4, timeout=60000)
    wait_idle(qtbot, window)
    assert {p.rate_per_s for p in lab.sweep_points} == {2.0, 20.0}
    assert "knee" in view.sweep.note.text()
    curves = [c for c in view.sweep.ttft_plot.getPlotItem().listDataItems()
              if len(c.getData()[0]) == 2]
    assert len(curves) == 2  # one line per policy, one point per rate

    view.sweep.low.setValue(30.0)  # low > high: refused with the reason, nothing runs
    view.sweep.high.setValue(10.0)
    view.sweep.button.click()
    assert "rates" in view.sweep.status.text() and not window.context.running_tasks()

    # a snapshot keeps both tabs; a replay shows them, and going live brings ours back
    path = window.export_snapshot(tmp_path / "compared.json")
    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("batching")
    assert replay.read_only and not replay.view.compare.button.isEnabled()
    assert [r.to_dict() for r in replay.comparison] == [r.to_dict() for r in lab.comparison]
    assert replay.sweep_points == lab.sweep_points
    assert replay.view.compare.table.item(0, 1).text() == table.item(0, 1).text()
    assert replay.view.sweep.note.text() == view.sweep.note.text()
    other.show_live()
    assert replay.comparison == [] and replay.view.compare.table.item(0, 1).text() == "—"


def test_the_clock_chooses_what_it_runs(qtbot, make_window):
    window, lab = open_lab(qtbot, make_window, requests=10)
    view = lab.view
    assert view.model_config.isEnabled() and not view.wall_model.isEnabled()  # simulated
    view.hardware.setCurrentIndex(view.hardware.findData("a100-80gb"))
    qtbot.waitUntil(lambda: lab.session is not None and lab.session.device == "a100-80gb",
                    timeout=60000)
    wait_idle(qtbot, window)
    assert lab.settings()["hardware"] == "a100-80gb"
    assert "Goodput = " in view.metrics_note.text() and " ÷ " in view.metrics_note.text()
    view.clock.setCurrentIndex(view.clock.findData("wall"))
    assert view.wall_model.isEnabled() and not view.hardware.isEnabled()
    qtbot.waitUntil(lambda: lab.session is not None and lab.session.settings["clock"] == "wall",
                    timeout=60000)
    wait_idle(qtbot, window)
    assert lab.session.model_id == "tiny"


def test_the_view_carries_the_prefix_settings_and_shows_hits_on_hover(qtbot):
    view = BatchingView()
    qtbot.addWidget(view)
    settings = dict(BATCHING_DEFAULTS, scenario="doc-qa", prefix_cache="radix",
                    schedule="lpm")
    view.set_settings(settings)
    got = view.settings()
    assert (got["scenario"], got["prefix_cache"], got["schedule"]) == ("doc-qa", "radix", "lpm")
    assert not view.requests_spin.isEnabled()  # a scenario sizes itself
    session = batching_session(settings)
    while not session.done:
        session.step()
    timeline = view.timeline
    timeline.draw(session.request_infos(), session.records)
    hit = next(o for o in session.outputs() if o["cached_tokens"])
    row = timeline.segments.row_of[hit["request_id"]]
    i = next(k for k in range(len(timeline.segments)) if timeline.segments.row[k] == row)
    assert f"({hit['cached_tokens']} cached: a prefix hit" in timeline.describe_segment(i)


def test_the_eviction_order_is_the_radix_trees_setting(qtbot):
    view = BatchingView()
    qtbot.addWidget(view)
    view.set_settings(dict(BATCHING_DEFAULTS, prefix_cache="radix", eviction_policy="lfu"))
    assert view.settings()["eviction_policy"] == "lfu" and view.eviction.isEnabled()
    view.set_settings(dict(BATCHING_DEFAULTS, prefix_cache="hash", eviction_policy="fifo"))
    assert view.settings()["eviction_policy"] == "fifo" and not view.eviction.isEnabled()


def test_a_headless_runs_section_reads_into_one_record_the_lab_draws(qtbot, make_window,
                                                                     tmp_path):
    """`inferlab run batching`'s section, read once by the registry's reader, is a frozen
    BatchingSnapshot; `show_snapshot(record)` replays it without the section."""
    from inferlab.app.cli import main

    path = tmp_path / "run.json"
    assert main(["run", "batching", "--requests", "12", "--snapshot", str(path)]) == 0
    section = read_snapshot(path).labs["batching"]
    record = resolve(lab_spec("batching").read_section)(section)
    assert isinstance(record, BatchingSnapshot) and record.has_run
    assert record.settings["requests"] == 12 and len(record.requests) == 12
    assert len(record.iterations) == record.metrics["iterations"] == len(
        section["state"]["iterations"])
    assert record.comparison == () and record.sweep == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.iterations = ()  # type: ignore[misc]

    window = make_window(str(tmp_path / "replay.ini"))
    lab = window.lab("batching")
    lab.show_snapshot(record)
    assert lab.read_only
    assert list(lab.view.iterations) == list(record.iterations)
    assert list(lab.view.requests) == list(record.requests)
    assert lab.view.slider.maximum() == len(record.iterations) - 1
    assert lab.view.settings()["requests"] == 12
    assert f"{len(record.iterations)} iterations of 12 requests" in lab.view.status.text()
    assert lab.comparison == [] and lab.sweep_points == []


def test_a_snapshot_with_a_comparison_draws_its_tabs_from_the_record(qtbot, make_window,
                                                                      tmp_path):
    record = resolve(lab_spec("batching").read_section)(lab_sections.batching())
    assert len(record.comparison) == 2 and len(record.sweep) == 4
    window = make_window(str(tmp_path / "replay.ini"))
    lab = window.lab("batching")
    lab.show_snapshot(record)
    assert lab.comparison == list(record.comparison) and lab.sweep_points == list(record.sweep)
    table = lab.view.compare.table
    assert table.item(0, 0).text() == "TTFT p50 (ms)" and table.item(0, 1).text() != "—"
    assert "knee" in lab.view.sweep.note.text()


def test_the_view_bench_times_the_timeline(qtbot):
    """The registry's `view_bench` gives the timeline's four figures (the keys the old
    app-side bench added to the engine's); the engine bench is engines/labs/batching."""
    spec = lab_spec("batching")
    assert spec.bench == "inferlab.engines.labs.batching.bench:run_batching_bench"
    figures = resolve(spec.view_bench)(timeline_requests=50, timeline_iterations=200)
    assert set(figures) == {"timeline_render_ms", "timeline_cursor_ms", "timeline_update_ms",
                            "timeline_update_max_ms"}
    assert all(math.isfinite(v) and v > 0 for v in figures.values())
    assert figures["timeline_update_max_ms"] >= figures["timeline_update_ms"]
