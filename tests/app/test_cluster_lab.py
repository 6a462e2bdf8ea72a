"""The cluster lab in the window: it runs the default cluster when first shown, runs again
with the view's choices, searches layouts, refuses GPUs that do not add up, and reopens its
snapshot read-only from its record."""

from __future__ import annotations

import argparse
import importlib.resources
import json

from inferlab.engines.labs.cluster import run as cluster_run
from inferlab.engines.labs.cluster.records import ClusterSnapshot
from inferlab.engines.labs.cluster.section import read_cluster_section
from inferlab.engines.trace.recorder import TraceRecorder
from tests.app.lab_helpers import wait_idle


def open_cluster(qtbot, make_window, **settings):
    window = make_window()
    lab = window.lab("cluster")
    lab._settings = lab._settings | dict(requests=30, **settings)
    lab.view.set_settings(lab._settings)
    window.show_lab("cluster")
    qtbot.waitUntil(lambda: lab.run_record is not None, timeout=60000)
    wait_idle(qtbot, window)
    return window, lab


def test_runs_searches_and_reopens_read_only(qtbot, make_window):
    window, lab = open_cluster(qtbot, make_window, gpus=4)
    record = lab.run_record
    assert isinstance(record, ClusterSnapshot)
    assert record == read_cluster_section(lab.run_section)  # the section, read once
    assert record.settings["gpus"] == 4 and len(record.state.instances) == 4
    assert record.metrics["completed"] == 30
    assert lab.view.timeline.n_bars > 0
    assert lab.view.facts.rowCount() > 5

    lab.view.layout_kind.setCurrentIndex(lab.view.layout_kind.findData("replicas"))
    lab.view.tp.setValue(2)
    lab.run()
    wait_idle(qtbot, window)
    assert [i.tp for i in lab.run_record.state.instances] == [2, 2]

    lab.search_layouts("replicas")
    wait_idle(qtbot, window)
    assert {c["label"] for c in lab.search["cells"]} == {
        "1 × t1", "2 × t1", "4 × t1", "1 × t2", "2 × t2", "1 × t4"}
    assert lab.view.tabs.currentWidget() is lab.view.search
    executor = lab.search["executor"]  # a local Ray where ray is installed, else serial
    assert executor.startswith(("ray (local, ", "serial")) and executor in lab.view.status.text()

    section = lab.snapshot_section()
    lab.show_snapshot(read_cluster_section(json.loads(json.dumps(section))))
    assert lab.read_only and not lab.view.run_button.isEnabled()
    assert lab.view.search.summary == lab.search
    lab.show_live()
    assert not lab.read_only and lab.view.run_button.isEnabled()


def test_gpus_that_do_not_split_are_said_not_run(qtbot, make_window):
    window, lab = open_cluster(qtbot, make_window)
    before = lab.run_record
    lab.view.layout_kind.setCurrentIndex(lab.view.layout_kind.findData("replicas"))
    lab.view.gpus.setValue(6)
    lab.view.tp.setValue(4)
    lab.run()
    wait_idle(qtbot, window)
    assert lab.run_record is before
    assert "do not split" in lab.view.status.text()


def test_show_snapshot_draws_the_record_of_a_headless_run(qtbot, make_window):
    """`inferlab run cluster`'s section, read once: show_snapshot(record) draws its lanes,
    facts and settings; live again, the lab shows its own (no) run."""
    p = argparse.ArgumentParser()
    cluster_run.add_arguments(p)
    args = p.parse_args(["--layout", "replicas", "--gpus", "2", "--requests", "20"])
    section, _ = cluster_run.run(args, TraceRecorder())
    record = read_cluster_section(json.loads(json.dumps(section)))
    window = make_window()
    lab = window.lab("cluster")
    lab.show_snapshot(record)
    assert lab.read_only and not lab.view.run_button.isEnabled()
    assert lab.view.timeline.n_bars > 0 and lab.view.facts.rowCount() > 5
    assert lab.view.settings()["layout"] == "replicas"
    assert lab.view.status.text() == "Read-only snapshot."
    lab.show_live()
    assert not lab.read_only and lab.run_record is None


def test_an_autoscaled_runs_snapshot_opens_on_its_autoscaling_tab(qtbot, make_window):
    """`run cluster --autoscale --trace` (a minute of the shipped Azure window): the record
    draws replicas over time and the peak fleet, on the Autoscaling tab."""
    p = argparse.ArgumentParser()
    cluster_run.add_arguments(p)
    trace = importlib.resources.files("inferlab.assets") / "traces" / \
        "azure_conv_2023_first20min.csv"
    with importlib.resources.as_file(trace) as path:
        args = p.parse_args(["--trace", str(path), "--window", "0:60", "--autoscale",
                             "--target-concurrency", "2", "--max-replicas", "3",
                             "--cold-start-s", "5"])
        section, summary = cluster_run.run(args, TraceRecorder())
    record = read_cluster_section(json.loads(json.dumps(section)))
    window = make_window()
    lab = window.lab("cluster")
    lab.show_snapshot(record)
    view = lab.view
    assert view.tabs.currentWidget() is view.autoscale
    assert len(view.autoscale.serving.getData()[0]) == 2 * len(summary["replicas_over_time"]) - 1
    assert view.autoscale.peak.getData()[1][0] == summary["peak_fleet"]["gpu_hours"]
    assert view.autoscale_box.isChecked() and view.settings()["autoscale"]
