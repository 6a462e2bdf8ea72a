"""The cluster lab on a published trace (issue 43): the form's trace runs the requests `inferlab
run cluster --trace` runs on the same options, a file that cannot be read is named and the last
run kept, and the snapshot keeps the trace's options (read back strictly)."""

from __future__ import annotations

import argparse
import copy
import importlib.resources
import json

import pytest

from inferlab.engines.labs.cluster import run as cluster_run
from inferlab.engines.labs.cluster.section import read_cluster_section
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from inferlab.engines.trace.recorder import TraceRecorder
from tests.app.lab_helpers import wait_idle
from tests.app.test_cluster_lab import open_cluster

AZURE = importlib.resources.files("inferlab.assets") / "traces/azure_conv_2023_first20min.csv"


def cli_run(*options: str) -> tuple[dict, dict]:
    """`inferlab run cluster OPTIONS`'s (section, summary), through its own functions."""
    p = argparse.ArgumentParser()
    cluster_run.add_arguments(p)
    return cluster_run.run(p.parse_args(list(options)), TraceRecorder())


def set_trace(lab, path, window: str = "", time_scale: float = 1.0, sample: int = 0) -> None:
    form = lab.view.trace_form
    form.window.setText(window)
    form.time_scale.setValue(time_scale)
    form.sample.setValue(sample)
    form.set_path(str(path))  # what the file dialog does


def without_trace(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k != "trace"}


@pytest.mark.parametrize("trace", ["mooncake", "azure"])
def test_a_trace_runs_the_requests_the_cli_runs(qtbot, make_window, tmp_path, trace):
    if trace == "mooncake":
        path = tmp_path / "m.jsonl"
        write_mooncake_jsonl(path, duration_s=20.0)
        window, time_scale, sample = "2:14", 2.0, 25
    else:
        path, window, time_scale, sample = AZURE, "60:240", 0.5, 30
    win, lab = open_cluster(qtbot, make_window, layout="replicas", gpus=2)
    assert lab.view.requests.isEnabled()
    set_trace(lab, path, window, time_scale, sample)
    assert not lab.view.requests.isEnabled()  # the trace brings its own requests
    lab.run()
    wait_idle(qtbot, win)

    section, summary = cli_run("--layout", "replicas", "--gpus", "2", "--trace", str(path),
                               "--window", window, "--time-scale", str(time_scale),
                               "--sample", str(sample))
    ours = lab.run_section
    assert ours["state"]["requests"] == section["state"]["requests"]
    assert ours["metrics"] == section["metrics"]
    assert without_trace(ours["settings"]) == without_trace(section["settings"])
    assert len(ours["state"]["requests"]) == summary["trace_requests"] <= sample
    status = lab.view.status.text()
    assert (f"{path.name} ({summary['trace_format']}): {summary['trace_requests']:,} requests"
            in status)
    assert f"unbounded-cache hit rate {summary['trace_hit_rate_unbounded']:.0%}" in status

    # the snapshot says which trace, on which options; read back, the form shows it
    used = {"path": str(path), "format": trace, "window": window, "time_scale": time_scale,
            "sample": sample}
    exported = json.loads(json.dumps(lab.snapshot_section()))
    assert exported["settings"]["trace"] == used
    record = read_cluster_section(exported)
    assert record.settings["trace"] == used
    lab.show_snapshot(record)
    assert lab.view.trace_form.trace() == used and not lab.view.trace_form.window.isEnabled()
    assert path.name in lab.view.status.text()
    lab.show_live()

    lab.view.trace_form.clear_button.click()  # back to the seeded workload
    lab.run()
    wait_idle(qtbot, win)
    assert lab.run_record.metrics["completed"] == 30
    assert lab.run_section["settings"]["trace"] is None


def test_a_search_runs_on_the_trace(qtbot, make_window, tmp_path):
    path = tmp_path / "m.jsonl"
    write_mooncake_jsonl(path, duration_s=10.0)
    win, lab = open_cluster(qtbot, make_window, gpus=2)
    set_trace(lab, path, sample=12)
    lab.search_layouts("replicas")
    wait_idle(qtbot, win)
    _, summary = cli_run("--gpus", "2", "--trace", str(path), "--sample", "12", "--search",
                         "replicas", "--serial")
    assert ([(c["label"], c["goodput_per_gpu"]) for c in lab.search["cells"]]
            == [(c["label"], c["goodput_per_gpu"]) for c in summary["cells"]])
    assert "m.jsonl (mooncake): 12 requests" in lab.view.status.text()


def test_a_bad_trace_is_named_and_the_last_run_kept(qtbot, make_window, tmp_path):
    win, lab = open_cluster(qtbot, make_window)
    before = lab.run_record
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
                   '{"timestamp": 5, "input_length": "x", "output_length": 2}\n')
    set_trace(lab, bad)
    lab.run()
    wait_idle(qtbot, win)
    status = lab.view.status.text()
    assert "bad.jsonl line 2" in status and "input_length" in status
    assert lab.run_record is before and lab.view.run_button.isEnabled()

    set_trace(lab, tmp_path / "gone.jsonl")
    lab.run()
    wait_idle(qtbot, win)
    assert "gone.jsonl: cannot read" in lab.view.status.text()
    assert lab.run_record is before

    set_trace(lab, bad, window="later")  # refused before any reading: named
    lab.run()
    wait_idle(qtbot, win)
    assert lab.view.status.text() == "trace.window: must be START:END seconds, got 'later'"
    assert lab.run_record is before


def test_the_snapshots_trace_is_read_strictly(qtbot, make_window):
    _, lab = open_cluster(qtbot, make_window)
    section = json.loads(json.dumps(lab.snapshot_section()))
    assert section["settings"]["trace"] is None
    older = copy.deepcopy(section)
    del older["settings"]["trace"]  # before issue 43's GUI: no field, no trace
    assert read_cluster_section(older).settings["trace"] is None
    for trace, field in (({"path": "m.jsonl", "window": "a:b"}, "trace.window"),
                         ({"path": "m.jsonl", "window": "5:2"}, "trace.window"),
                         ({"path": "m.jsonl", "time_scale": 0}, "trace.time_scale"),
                         ({"path": "m.jsonl", "sample": 2.5}, "trace.sample"),
                         ({"path": "m.jsonl", "format": "csv"}, "trace.format"),
                         ({"window": "1:2"}, "trace: missing field 'path'"), ("m.jsonl", "trace")):
        bad = copy.deepcopy(section)
        bad["settings"]["trace"] = trace
        with pytest.raises(ValueError, match=f"labs.cluster.settings.{field}"):
            read_cluster_section(bad)


def test_an_autoscaled_fleet_runs_on_the_trace(qtbot, make_window):
    """The Autoscaling tab's run (KPA, then the fixed fleets sized for the peak, whose
    progress once reached the worker as None and failed the run) on Azure's trace."""
    win, lab = open_cluster(qtbot, make_window, layout="replicas", autoscale=True,
                            max_replicas=3)
    assert lab.run_record.metrics["autoscale"]  # the seeded run, in the window
    set_trace(lab, AZURE, "0:120", 0.25)
    lab.run()
    wait_idle(qtbot, win)
    section, summary = cli_run("--autoscale", "--max-replicas", "3", "--trace", str(AZURE),
                               "--window", "0:120", "--time-scale", "0.25")
    assert lab.run_section["metrics"] == section["metrics"]
    assert lab.run_section["state"] == section["state"]
    assert lab.view.tabs.currentWidget() is lab.view.autoscale
    assert f"({summary['trace_format']}): {summary['trace_requests']:,} requests" in (
        lab.view.status.text())


def test_reading_a_long_trace_shows_progress(qtbot, make_window, tmp_path):
    path = tmp_path / "long.jsonl"
    rows = write_mooncake_jsonl(path, duration_s=1400.0)
    assert rows > 8192  # the reader reports every 8,192 rows
    win, lab = open_cluster(qtbot, make_window)
    said = []
    win.context.task_progress.connect(lambda name, fraction, message: said.append(
        (fraction, message)))
    set_trace(lab, path, sample=10)
    lab.run()
    wait_idle(qtbot, win)
    assert lab.run_record.metrics["completed"] == 10
    assert any(m.startswith("long.jsonl: reading the trace: 8,192 rows") and 0 < f <= 0.05
               for f, m in said)
