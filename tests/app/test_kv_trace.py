"""The KV lab on a published trace (issue 43): the trace line's file runs the steps `inferlab
run kv --trace` runs on the same options, read in a worker before the lab resets onto it; a
file that cannot be read is named and the run on screen kept; the snapshot keeps the trace's
options (read back strictly); Clear trace runs the scenario again."""

from __future__ import annotations

import argparse
import copy
import importlib.resources
import json

import pytest

from inferlab.engines.labs.kv import run as kv_run
from inferlab.engines.labs.kv.section import read_kv_section
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from inferlab.engines.trace.recorder import TraceRecorder
from tests.app.lab_helpers import open_lab, wait_idle

AZURE = importlib.resources.files("inferlab.assets") / "traces/azure_conv_2023_first20min.csv"


def cli_section(*options: str) -> tuple[dict, dict]:
    """`inferlab run kv OPTIONS`'s (section, summary), through its own functions."""
    p = argparse.ArgumentParser()
    kv_run.add_arguments(p)
    return kv_run.run(p.parse_args(["--model", "tiny", *options]), TraceRecorder())


def without_times(steps: list) -> list:
    """Step records without their wall time (step_s)."""
    return [{k: v for k, v in step.items() if k != "step_s"} for step in steps]


def choose(lab, path, window="", time_scale=1.0, sample=0, length_scale=1.0, step_s=0.05):
    form = lab.view.trace_form
    form.window.setText(window)
    form.time_scale.setValue(time_scale)
    form.sample.setValue(sample)
    form.length_scale.setValue(length_scale)
    form.step_s.setValue(step_s)
    form.set_path(str(path))  # what the file dialog does: the lab reads it


def run_to_the_end(qtbot, window, lab) -> None:
    lab.toggle_run()
    qtbot.waitUntil(lambda: lab.session is not None and lab.session.done, timeout=120000)
    wait_idle(qtbot, window)
    lab.flush()


@pytest.mark.parametrize("trace", ["mooncake", "azure"])
def test_a_trace_runs_the_steps_the_cli_runs(qtbot, make_window, tmp_path, trace):
    if trace == "mooncake":
        path = tmp_path / "m.jsonl"
        write_mooncake_jsonl(path, duration_s=30.0)
        options = ("2:24", 1.5, 10, 0.015625, 0.5)
    else:
        path, options = AZURE, ("30:300", 1.0, 8, 0.03125, 2.0)
    window_text, time_scale, sample, length_scale, step_s = options
    window, lab = open_lab(qtbot, make_window, "kv")
    scenario_records = len(lab.records)
    choose(lab, path, *options)
    qtbot.waitUntil(lambda: lab.info is not None and lab.info.scenario == "trace",
                    timeout=60000)
    wait_idle(qtbot, window)
    assert not lab.view.scenario.isEnabled()  # the trace runs in its place
    run_to_the_end(qtbot, window, lab)
    assert len(lab.records) != scenario_records

    section, summary = cli_section(
        "--trace", str(path), "--window", window_text, "--time-scale", str(time_scale),
        "--sample", str(sample), "--length-scale", str(length_scale), "--step-s", str(step_s))
    ours = json.loads(json.dumps(lab.snapshot_section()))
    assert ours["state"]["run"] == section["state"]["run"]
    assert ours["state"]["sequences"] == section["state"]["sequences"]
    assert without_times(ours["state"]["steps"]) == without_times(section["state"]["steps"])
    wall = {"model_s"}  # the model's wall time
    assert ({k: v for k, v in ours["metrics"].items() if k not in wall}
            == {k: v for k, v in section["metrics"].items() if k not in wall})
    status = lab.view.status.text()
    assert (f"the {summary['trace_requests']:,} requests of {path.name} "
            f"({summary['trace_format']}, unbounded-cache hit rate "
            f"{summary['trace_hit_rate_unbounded']:.0%})") in status

    # the snapshot says which trace on which options; read back, the line shows it
    used = {"path": str(path), "format": trace, "window": window_text,
            "time_scale": time_scale, "sample": sample, "length_scale": length_scale,
            "step_s": step_s, "seed": 0}
    assert ours["settings"]["trace"] == used
    record = read_kv_section(ours)
    assert record.settings["trace"] == used
    lab.show_snapshot(record)
    assert lab.view.trace_form.trace() == used
    assert not lab.view.trace_form.choose_button.isEnabled()
    lab.show_live()
    assert lab.view.trace_form.choose_button.isEnabled()

    lab.view.trace_form.clear_button.click()  # back to the scenario
    qtbot.waitUntil(lambda: lab.info is not None and lab.info.scenario == "shared-prompt",
                    timeout=60000)
    wait_idle(qtbot, window)
    assert lab.settings()["trace"] is None and lab.view.scenario.isEnabled()
    assert lab.snapshot_section()["settings"]["trace"] is None


def test_a_bad_trace_is_named_and_the_run_kept(qtbot, make_window, tmp_path):
    window, lab = open_lab(qtbot, make_window, "kv")
    session, records = lab.session, list(lab.records)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
                   '{"timestamp": 5, "input_length": -3, "output_length": 2}\n')
    choose(lab, bad)
    wait_idle(qtbot, window)
    status = lab.view.status.text()
    assert "bad.jsonl line 2" in status and "input_length" in status
    assert lab.session is session and lab.records == records
    assert lab.view.trace_form.trace() is None  # the line shows what runs: no trace
    assert lab.settings()["trace"] is None

    choose(lab, bad, window="soon")  # refused before any reading
    assert lab.view.status.text() == ("KV lab: trace.window: must be START:END seconds, "
                                      "got 'soon'")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    choose(lab, empty)
    wait_idle(qtbot, window)
    assert "empty.jsonl: the trace holds no request" in lab.view.status.text()
    assert lab.session is session and lab.records == records
    lab.step()  # the run goes on
    qtbot.waitUntil(lambda: len(lab.records) == len(records) + 1, timeout=30000)
    wait_idle(qtbot, window)


def test_the_snapshots_trace_is_read_strictly(qtbot, make_window):
    _, lab = open_lab(qtbot, make_window, "kv")
    section = json.loads(json.dumps(lab.snapshot_section()))
    assert section["settings"]["trace"] is None
    older = copy.deepcopy(section)
    del older["settings"]["trace"]  # before issue 43's GUI: no field, no trace
    assert read_kv_section(older).settings["trace"] is None
    for trace, field in (({"path": "m.jsonl", "length_scale": 1.5}, "trace.length_scale"),
                         ({"path": "m.jsonl", "step_s": 0}, "trace.step_s"),
                         ({"path": "m.jsonl", "window": "1:x"}, "trace.window"),
                         ({"path": "m.jsonl", "seed": -1}, "trace.seed"),
                         ({"path": 3}, "trace.path")):
        bad = copy.deepcopy(section)
        bad["settings"]["trace"] = trace
        with pytest.raises(ValueError, match=f"labs.kv.settings.{field}"):
            read_kv_section(bad)


def test_reading_a_long_trace_shows_progress(qtbot, make_window, tmp_path):
    path = tmp_path / "long.jsonl"
    assert write_mooncake_jsonl(path, duration_s=1400.0) > 8192  # reported every 8,192 rows
    window, lab = open_lab(qtbot, make_window, "kv")
    said = []
    window.context.task_progress.connect(lambda name, fraction, message: said.append(
        (name, fraction, message)))
    choose(lab, path, sample=6, length_scale=0.015625)
    qtbot.waitUntil(lambda: lab.info is not None and lab.info.scenario == "trace",
                    timeout=60000)
    wait_idle(qtbot, window)
    assert any(name == "KV lab: read trace" and 0 < f <= 1
               and m.startswith("long.jsonl: reading the trace: 8,192 rows")
               for name, f, m in said)
    assert "the 6 requests of long.jsonl" in lab.view.status.text()
