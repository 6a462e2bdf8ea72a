"""The endpoint lab against the fake server (engines/endpoint/fake_server.py): idle, it has
contacted nothing; Run draws every request; Stop closes every connection; a snapshot holds no
byte of the key and replays read-only from the section read once. And `inferlab run endpoint` / `bench endpoint`: the
--json figures, the one-sentence errors with nothing written."""

from __future__ import annotations

import argparse
import json

import pytest

from inferlab.app.cli import main
from inferlab.engines.labs.endpoint import bench
from inferlab.engines.labs.endpoint import run as endpoint_run
from inferlab.engines.labs.endpoint.section import read_endpoint_section
from inferlab.engines.trace.recorder import TraceRecorder
from tests.app.lab_helpers import wait_idle

KEY = "sk-endpoint-lab-test-KEY-90c1d2"


@pytest.fixture
def server(fake_server):  # tests/conftest.py's
    return fake_server


def set_fields(lab, url: str, requests: int = 6, key: str = "") -> None:
    v = lab.view
    v.url.setText(url)
    v.requests.setValue(requests)
    v.api_key.setText(key)
    v.scrape_hz.setValue(4)


def test_idle_lab_contacts_nothing_then_runs_and_replays(qtbot, make_window, server, tmp_path,
                                                         settings_path):
    fake = server(api_key=KEY, metrics=True)
    window = make_window()
    lab = window.lab("endpoint")
    window.show_lab("endpoint")
    qtbot.wait(200)
    assert fake.requests == 0 and fake.open_connections == 0
    assert lab.view.status.text().startswith("Idle: nothing has been contacted")
    set_fields(lab, fake.url, key=KEY)
    lab.view.run_button.click()
    assert lab.view.stop_button.isEnabled() and not lab.view.run_button.isEnabled()
    wait_idle(qtbot, window)
    r = lab.record
    assert r is not None and r.metrics["completed"] == 6 and r.metrics["failed"] == 0
    assert fake.requests == 7  # the probe's one token, then the workload
    assert "completed, 0 failed" in lab.view.status.text()
    assert len(lab.view.timeline.segments.request_ids) == 6
    assert lab.view.timeline.running_curve.getData()[0] is not None
    assert lab.view.metrics.table.rowCount() > 5
    assert lab.view.run_button.isEnabled()

    path = window.export_snapshot(tmp_path / "ep.json")
    blob = path.read_bytes()
    assert KEY.encode() not in blob and KEY[3:].encode() not in blob
    lab.save_settings()
    window.context.settings.sync()
    assert KEY.encode() not in open(settings_path, "rb").read()
    data = json.loads(blob)
    tracks = {e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "thread_name"}
    assert {f"request r{i:04d}" for i in range(6)} <= tracks

    window.open_snapshot(path)
    assert lab.read_only and not lab.view.run_button.isEnabled()
    assert len(lab.view.timeline.segments.request_ids) == 6
    assert lab.view.status.text().startswith("Read-only snapshot: 6 requests")
    window.show_live()
    assert not lab.read_only and lab.view.run_button.isEnabled()


def test_show_snapshot_draws_the_record_of_a_headless_run(qtbot, make_window, server):
    """`inferlab run endpoint`'s section, read once into its EndpointSnapshot:
    show_snapshot(record) draws the run's requests, metrics and settings read-only, and the
    lab goes back to its own (idle) state after."""
    fake = server(metrics=True)
    p = argparse.ArgumentParser()
    endpoint_run.add_arguments(p)
    section, _ = endpoint_run.run(p.parse_args(["--url", fake.url, "--requests", "5",
                                                "--scrape-hz", "4"]), TraceRecorder())
    snapshot = read_endpoint_section(json.loads(json.dumps(section)))
    window = make_window()
    lab = window.lab("endpoint")
    lab.show_snapshot(snapshot)
    assert lab.read_only and not lab.view.run_button.isEnabled()
    assert lab.record is snapshot.run
    assert lab.view.timeline.segments.request_ids == tuple(f"r{i:04d}" for i in range(5))
    assert lab.view.metrics.table.rowCount() > 5
    assert lab.view.settings()["url"] == fake.url
    assert lab.view.status.text() == (f"Read-only snapshot: 5 requests to {fake.url} "
                                      "(fake-model).")
    lab.show_live()
    assert not lab.read_only and lab.record is None
    assert lab.view.settings()["url"] != fake.url


def test_stop_cancels_and_closes_every_connection(qtbot, make_window, server):
    fake = server(token_interval_s=0.05)
    window = make_window()
    lab = window.lab("endpoint")
    window.show_lab("endpoint")
    set_fields(lab, fake.url, requests=40)
    lab.view.concurrency.setValue(8)
    lab.view.run_button.click()
    qtbot.waitUntil(lambda: fake.running >= 8, timeout=30000)
    lab.view.stop_button.click()
    wait_idle(qtbot, window, 10000)
    assert lab.record.stopped == "cancelled" and lab.record.incomplete == 8
    assert "(stopped)" in lab.view.status.text()
    qtbot.waitUntil(lambda: fake.open_connections == 0, timeout=30000)


def test_bad_input_is_one_sentence(qtbot, make_window):
    window = make_window()
    lab = window.lab("endpoint")
    window.show_lab("endpoint")
    set_fields(lab, "ftp://example.org")
    lab.view.run_button.click()
    assert lab.view.status.text() == ("Cannot run: 'ftp://example.org' is not an http(s) URL: "
                                      "enter one like http://127.0.0.1:8000")
    set_fields(lab, "http://127.0.0.1:1")
    lab.view.run_button.click()
    wait_idle(qtbot, window)
    assert lab.view.status.text() == ("Failed: nothing listens at 127.0.0.1:1 (connection "
                                      "refused): is the server running?")
    assert lab.record is None


def test_sweep_and_side_by_side_in_the_lab(qtbot, make_window, server):
    fake = server()
    window = make_window()
    lab = window.lab("endpoint")
    window.show_lab("endpoint")
    set_fields(lab, fake.url, requests=4)
    lab.view.sweep.rates.setValue(1)
    lab.view.sweep.button.click()
    wait_idle(qtbot, window)
    assert [p.strategy for p in lab.sweep_result.points] == ["synchronous", "throughput",
                                                             "constant"]
    assert "throughput" in lab.view.sweep.status.text()
    lab.view.run_button.click()
    wait_idle(qtbot, window)
    lab.view.metrics.compare_button.click()
    wait_idle(qtbot, window)
    assert set(lab.side["columns"]) == {"endpoint", "engine", "simulated"}
    assert lab.side["columns"]["engine"]["metrics"]["completed"] == 4
    assert lab.view.metrics.side.columnCount() == 4


# ---- the command line --------------------------------------------------------------------------

def test_run_endpoint_json_and_the_snapshot(capsys, tmp_path, server, monkeypatch):
    fake = server(api_key=KEY)
    monkeypatch.setenv("EP_TEST_KEY", KEY)
    snap = tmp_path / "ep.json"
    assert main(["run", "endpoint", "--url", fake.url, "--requests", "5", "--rate", "50",
                 "--api-key-env", "EP_TEST_KEY", "--snapshot", str(snap), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["metrics"]
    assert out["completed"] == 5 and out["server_metrics"].startswith(
        "This server exports no /metrics")
    for r in out["requests"]:
        assert r["error"] is None and 0 < r["ttft_s"] < r["e2e_s"]
        assert r["chunk_times_s"][0] == pytest.approx(r["ttft_s"])
        assert r["chunk_times_s"][-1] == pytest.approx(r["e2e_s"])
        assert len(r["chunk_times_s"]) == r["output_tokens"]
    assert KEY.encode() not in snap.read_bytes()
    section = json.loads(snap.read_text())["inferlab"]["labs"]["endpoint"]
    assert section["settings"]["concurrency"] == 0 and section["settings"]["rate_per_s"] == 50


@pytest.mark.parametrize("argv,message", [
    (["--url", "ftp://x"], "'ftp://x' is not an http(s) URL"),
    (["--url", "http://127.0.0.1:1"], "nothing listens at 127.0.0.1:1 (connection refused)"),
    (["--url", "http://127.0.0.1:1", "--rate", "2", "--concurrency", "2"],
     "give --rate (arrivals) or --concurrency (in flight), not both"),
    (["--url", "http://127.0.0.1:1", "--requests", "0"], "--requests: expected an integer"),
    (["--url", "KEYED", "--api-key-env", "EP_NOT_SET_VAR"],
     "the environment variable EP_NOT_SET_VAR is not set"),
    (["--url", "KEYED"], "wants an API key (HTTP 401)"),
    (["--url", "NOTOPENAI"], "does not look like an OpenAI-compatible server"),
])
def test_run_endpoint_bad_input(capsys, tmp_path, server, argv, message):
    if "KEYED" in argv:
        argv[argv.index("KEYED")] = server(api_key=KEY).url
    if "NOTOPENAI" in argv:
        argv[argv.index("NOTOPENAI")] = server(mode="notopenai").url
    snap = tmp_path / "s.json"
    assert main(["run", "endpoint", *argv, "--snapshot", str(snap)]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not snap.exists() and not list(tmp_path.iterdir())


def test_bench_endpoint_sweeps_a_url_and_options_are_checked(capsys, server, monkeypatch):
    fake = server()
    assert main(["bench", "endpoint", "--url", fake.url, "--rates", "1", "--requests", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["strategy"] for p in out["points"]] == ["synchronous", "throughput", "constant"]
    assert all(p["completed"] == 4 for p in out["points"])
    monkeypatch.setattr(bench, "client_overhead", lambda: {"cpu_cores_per_100_streams": 0.1})
    monkeypatch.setattr(bench, "scrape_agreement",
                        lambda: {"server_vs_client_output_tokens_per_s": 1.0})
    assert main(["bench", "endpoint", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got.pop("kernels")["kernels"] in ("native", "torch")  # every bench names its path
    assert got == {"client_overhead": {"cpu_cores_per_100_streams": 0.1},
                   "scrape_agreement": {"server_vs_client_output_tokens_per_s": 1.0}}
    assert main(["bench", "roofline", "--url", fake.url]) != 0
    assert "--url is an option of bench endpoint only" in capsys.readouterr().err
