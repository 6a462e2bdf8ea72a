"""The endpoint lab's Trace… (views/endpoint_workload.py, app/labs/endpoint.py) against the
fake server: a published trace chosen in the form sends exactly the requests
`endpoint_requests` builds on the same settings (what `run endpoint --trace` reads), each
scheduled at its arrival time; a bad file, window or row is named in the status line and the
run on screen kept; the trace's settings (and a `--workload` file's) round-trip through the
snapshot; a long file shows its reading progress."""

from __future__ import annotations

import functools
import json

import pytest

from inferlab.engines.endpoint.fake_server import FakeServer
from inferlab.engines.labs.endpoint.section import read_endpoint_section
from inferlab.engines.labs.endpoint.settings import (
    check_endpoint_settings,
    endpoint_requests,
    published_trace,
)
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from tests.app.lab_helpers import wait_idle

SCHEDULE_TOLERANCE_S = 1e-6  # the runner adds one start time to every arrival
TRACE_KEYS = ("workload_file", "trace_file", "trace_format", "trace_window",
              "trace_time_scale", "trace_sample")


@pytest.fixture
def server(fake_server):  # tests/conftest.py's, tokens every millisecond
    return functools.partial(fake_server, token_interval_s=0.001)


def open_endpoint(make_window, url: str):
    window = make_window()
    lab = window.lab("endpoint")
    window.show_lab("endpoint")
    lab.view.url.setText(url)
    lab.view.scrape_hz.setValue(0)
    lab.view.url.editingFinished.emit()
    return window, lab


def choose_trace(lab, path, window: str = "", time_scale: float = 1.0, sample: int = 0,
                 format: str | None = None) -> None:
    """What a user does in the form: the file, then each option edited."""
    form = lab.view.source.form
    form.set_path(str(path))
    form.format.setCurrentIndex(max(0, form.format.findData(format)))  # None: from the file
    form.window.setText(window)
    form.window.editingFinished.emit()
    form.time_scale.setValue(time_scale)
    form.time_scale.editingFinished.emit()
    form.sample.setValue(sample)
    form.sample.editingFinished.emit()


def sent_prompts(fake: FakeServer) -> list[str]:
    return [b["prompt"] for b in fake.bodies if b["prompt"] != "Hello"]  # not the probe's


def test_a_trace_chosen_in_the_form_sends_what_run_endpoint_reads(qtbot, make_window, server,
                                                                  tmp_path):
    fake = server()
    trace = tmp_path / "mooncake.jsonl"
    rows = write_mooncake_jsonl(trace, duration_s=4.0)
    window, lab = open_endpoint(make_window, fake.url)
    v = lab.view
    assert v.pacing.currentData() == "concurrency" and v.rate.isEnabled()
    assert not v.source.form.window.isVisibleTo(v)  # the options only with a file
    choose_trace(lab, trace, window="0:1.5", time_scale=0.5)
    # chosen as `run endpoint --trace` takes it: at its arrival times, all of the window
    assert v.pacing.currentData() == "arrivals" and not v.concurrency.isEnabled()
    assert v.requests.value() == v.requests.maximum() and not v.rate.isEnabled()
    assert v.source.form.window.isVisibleTo(v)
    settings = check_endpoint_settings(lab.settings())
    assert {k: settings[k] for k in TRACE_KEYS} == {
        "workload_file": "", "trace_file": str(trace), "trace_format": "",
        "trace_window": "0:1.5", "trace_time_scale": 0.5, "trace_sample": 0}
    expected = endpoint_requests(settings)
    _, figures = published_trace(settings)
    assert 3 <= len(expected) < rows  # the window cut the trace

    v.run_button.click()
    wait_idle(qtbot, window)
    r = lab.record
    assert r.metrics["completed"] == len(expected) and r.metrics["failed"] == 0
    assert sorted(sent_prompts(fake)) == sorted(q.prompt for q in expected)
    results = sorted(r.results, key=lambda x: x.index)
    assert [x.output_tokens for x in results] == [q.output_tokens for q in expected]
    start = results[0].scheduled_s - expected[0].arrival_s
    assert [x.scheduled_s - start for x in results] == pytest.approx(
        [q.arrival_s for q in expected], abs=SCHEDULE_TOLERANCE_S)
    assert all(x.send_s >= x.scheduled_s - 1e-3 for x in results)  # none sent early
    assert expected[-1].arrival_s - expected[0].arrival_s > 0.2  # all at once would fail
    status = v.status.text()
    assert status.startswith(f"{r.model} at {fake.url}: {len(expected)} completed")
    assert status.endswith(
        f" Trace mooncake.jsonl ({figures['trace_format']}): {figures['trace_requests']:,} "
        f"requests, unbounded-cache hit rate {figures['trace_hit_rate_unbounded']:.0%}.")

    # cleared: the seeded workload again, with the count it had
    v.source.form.clear()
    assert v.requests.value() == 16 and v.rate.isEnabled()
    assert not v.source.form.window.isVisibleTo(v)
    assert {k: lab.settings()[k] for k in TRACE_KEYS} == {
        "workload_file": "", "trace_file": "", "trace_format": "", "trace_window": "",
        "trace_time_scale": 1.0, "trace_sample": 0}


def test_a_bad_trace_is_named_and_the_run_on_screen_kept(qtbot, make_window, server,
                                                         tmp_path):
    fake = server()
    window, lab = open_endpoint(make_window, fake.url)
    lab.view.requests.setValue(3)
    lab.view.run_button.click()
    wait_idle(qtbot, window)
    kept, sent = lab.record, fake.requests
    assert kept.metrics["completed"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 3, "output_length": 1}\n'
                   '{"timestamp": 10, "input_length": "x", "output_length": 1}\n')
    good = tmp_path / "good.jsonl"
    good.write_text('{"timestamp": 0, "input_length": 3, "output_length": 1}\n')
    said = []
    for path, window_text, fmt in ((bad, "", None), (good, "50:60", None),
                                   (good, "", "azure"), (tmp_path / "gone.csv", "", None)):
        choose_trace(lab, path, window=window_text, format=fmt)
        settings = check_endpoint_settings(lab.settings())
        with pytest.raises(ValueError) as reader:  # TraceError is one
            published_trace(settings)
        lab.view.run_button.click()
        wait_idle(qtbot, window)
        assert lab.view.status.text() == f"Cannot run: {reader.value}"
        assert path.name in lab.view.status.text()
        assert lab.record is kept and fake.requests == sent
        assert lab.view.timeline.segments.request_ids == ("r0000", "r0001", "r0002")
        assert lab.view.run_button.isEnabled() and not lab.view.stop_button.isEnabled()
        said.append(lab.view.status.text())
    assert said[0].startswith("Cannot run: bad.jsonl line 2") and "input_length" in said[0]
    assert "holds no request (in the window)" in said[1]
    # a window that is no window is refused before anything runs
    choose_trace(lab, good, window="a:b")
    assert lab.view.status.text().startswith("Not accepted: settings.trace_window: expected "
                                             "START:END seconds")
    lab.view.run_button.click()
    wait_idle(qtbot, window)
    assert lab.view.status.text().startswith("Not accepted: settings.trace_window")
    assert lab.record is kept and fake.requests == sent


def test_the_trace_settings_round_trip_through_the_snapshot(qtbot, make_window, server,
                                                            tmp_path):
    fake = server()
    trace = tmp_path / "m.jsonl"
    write_mooncake_jsonl(trace, duration_s=3.0)
    window, lab = open_endpoint(make_window, fake.url)
    lab.view.seed.setValue(7)
    lab.view.seed.editingFinished.emit()
    choose_trace(lab, trace, window="0:2", time_scale=0.25, sample=4, format="mooncake")
    lab.view.run_button.click()
    wait_idle(qtbot, window)
    assert lab.record.metrics["completed"] == 4
    chosen = {k: lab.settings()[k] for k in TRACE_KEYS}
    assert chosen == {"workload_file": "", "trace_file": str(trace),
                      "trace_format": "mooncake", "trace_window": "0:2",
                      "trace_time_scale": 0.25, "trace_sample": 4}
    path = window.export_snapshot(tmp_path / "ep.json")
    section = json.loads(path.read_text())["inferlab"]["labs"]["endpoint"]
    assert {k: section["settings"][k] for k in TRACE_KEYS} == chosen
    assert {k: read_endpoint_section(section).settings[k] for k in TRACE_KEYS} == chosen
    lab.view.source.form.clear()
    window.open_snapshot(path)
    assert lab.read_only and not lab.view.source.form.choose_button.isEnabled()
    assert {k: lab.view.settings()[k] for k in TRACE_KEYS} == chosen
    assert lab.view.source.form.name.text() == "m.jsonl"
    window.show_live()
    assert lab.view.source.form.trace() is None and lab.view.source.form.choose_button \
        .isEnabled()


def test_a_workload_file_shows_in_the_form_and_stays_one(qtbot, make_window, server,
                                                         tmp_path):
    """`run endpoint --workload F` (InferLab's JSONL, its own reader): shown as the form's
    file, kept a workload_file through a run; an edit in the form makes it a trace; cleared,
    the seeded workload's default count."""
    fake = server()
    jsonl = tmp_path / "w.jsonl"
    jsonl.write_text("".join(json.dumps({"arrival_s": 0.05 * i, "prompt_tokens": 5 + i,
                                         "output_tokens": 3}) + "\n" for i in range(4)))
    window, lab = open_endpoint(make_window, fake.url)
    lab.view.set_settings(dict(lab.settings(), workload_file=str(jsonl), concurrency=0,
                               requests=10_000))
    assert lab.view.source.form.name.text() == "w.jsonl"
    assert lab.view.source.form.format.currentData() == "inferlab"
    assert (lab.view.settings()["workload_file"], lab.view.settings()["trace_file"]) == (
        str(jsonl), "")
    lab.view.run_button.click()
    wait_idle(qtbot, window)
    settings = check_endpoint_settings(lab.settings())
    assert settings["workload_file"] == str(jsonl)
    assert lab.record.metrics["completed"] == len(endpoint_requests(settings)) == 4
    assert "Trace" not in lab.view.status.text()  # no published trace's figures
    form = lab.view.source.form
    form.time_scale.setValue(2.0)
    form.time_scale.editingFinished.emit()
    assert {k: lab.settings()[k] for k in TRACE_KEYS} == {
        "workload_file": "", "trace_file": str(jsonl), "trace_format": "inferlab",
        "trace_window": "", "trace_time_scale": 2.0, "trace_sample": 0}
    form.clear()  # the seeded workload: its default count, not the file's "all"
    assert lab.settings()["requests"] == 16 and lab.settings()["workload_file"] == ""


def test_reading_a_long_trace_shows_progress(qtbot, make_window, server, tmp_path):
    fake = server()
    path = tmp_path / "long.jsonl"
    assert write_mooncake_jsonl(path, duration_s=1400.0) > 8192  # read every 8,192 rows
    window, lab = open_endpoint(make_window, fake.url)
    said = []
    window.context.task_progress.connect(lambda name, fraction, message: said.append(
        (name, fraction, message)))
    choose_trace(lab, path, time_scale=0.001, sample=5)
    lab.view.run_button.click()
    wait_idle(qtbot, window)
    assert lab.record.metrics["completed"] == 5
    assert any(name == "Endpoint lab: read the workload" and 0 < f <= 1
               and m.startswith("long.jsonl: reading the trace: 8,192 rows")
               for name, f, m in said)


def test_stop_while_reading_sends_nothing(qtbot, make_window, server, tmp_path):
    fake = server()
    path = tmp_path / "long.jsonl"
    write_mooncake_jsonl(path, duration_s=1400.0)
    window, lab = open_endpoint(make_window, fake.url)
    choose_trace(lab, path)
    lab.view.run_button.click()
    assert lab.view.stop_button.isEnabled()  # reading is stoppable
    lab.view.stop_button.click()
    wait_idle(qtbot, window)
    assert lab.view.status.text() == "Stopped before the run: nothing was sent."
    assert fake.requests == 0 and lab.record is None and lab.view.run_button.isEnabled()
