"""The endpoint lab's snapshot section: a run against the fake server reads back equal (the
text aside, which is not kept); a malformed section (seeded fuzz of a real one) raises a
ValueError naming the field, nothing else; the Gantt's segments and the per-request tracks."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import random

import pytest

from inferlab.engines.endpoint.fake_server import FakeServer
from inferlab.engines.endpoint.load import EndpointRun
from inferlab.engines.endpoint.sweep import EndpointSweep, EndpointSweepPoint
from inferlab.engines.labs.batching.timeline import DECODE, PREEMPTED, STALLED, WAITING
from inferlab.engines.labs.endpoint import run as endpoint_run
from inferlab.engines.labs.endpoint.records import EndpointRecord, EndpointSnapshot
from inferlab.engines.labs.endpoint.section import endpoint_section, read_endpoint_section
from inferlab.engines.labs.endpoint.settings import ENDPOINT_DEFAULTS
from inferlab.engines.labs.endpoint.timeline import request_segments
from inferlab.engines.labs.endpoint.trace import endpoint_trace
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.trace.recorder import TraceRecorder
from tests.engines.endpoint.conftest import quick_settings, requests
from tests.fuzz import json_paths, mutate_json, run_cases


@pytest.fixture(scope="module")
def record():
    with FakeServer(token_interval_s=0.002, metrics=True) as server:
        work = requests(3, output_tokens=5) + requests(1, prompt="[fake:http500]") \
            + requests(1, prompt="[fake:reset]", output_tokens=8)
        result = EndpointRun(quick_settings(server.url, concurrency=2, scrape_hz=4), work,
                             slo=SLO(ttft_s=1.0)).run()
    return EndpointRecord.of(result)


SWEEP = EndpointSweep(
    (EndpointSweepPoint("synchronous", 2.0, 2.0, 50.0, 0.01, 0.02, 0.005, 0.006, 8, 0, 2.0),
     EndpointSweepPoint("throughput", 9.0, 9.0, 200.0, 0.05, 0.2, 0.01, 0.02, 8, 0, 9.0)),
    None, SLO(ttft_s=0.5, tpot_s=0.05))
SIDE = {"columns": {}, "notes": ["a note"]}


@pytest.fixture(scope="module")
def section(record):
    side = {"columns": {"endpoint": {"title": "Endpoint", "metrics": record.metrics}},
            "notes": ["a note"]}
    sec = endpoint_section(dict(ENDPOINT_DEFAULTS), record, SWEEP, side)
    return json.loads(json.dumps(sec))


def test_a_section_reads_back_equal(record, section):
    snapshot = read_endpoint_section(section)
    got, sweep, side = snapshot.run, snapshot.sweep, snapshot.side_by_side
    assert snapshot.settings == ENDPOINT_DEFAULTS
    assert got.results == tuple(dataclasses.replace(r, text="") for r in record.results)
    assert got.metrics == record.metrics and got.failures == record.failures == {
        "http": 1, "reset": 1}
    assert got.scrape.scrapes == record.scrape.scrapes > 0
    assert set(got.scrape.common) == set(record.scrape.common)
    assert (got.scrape.common["running"] == record.scrape.common["running"]).all()
    assert got.agreement == record.agreement and got.model == "fake-model"
    assert sweep == SWEEP
    assert side["columns"]["endpoint"]["metrics"] == record.metrics
    assert "\"api_key\"" not in json.dumps(section)  # the variable's name only


def test_the_headless_runs_section_reads_into_one_frozen_record(monkeypatch):
    """`inferlab run endpoint`'s section (key from the environment: in none of it) read once
    into an EndpointSnapshot: the settings as checked, the run's requests and metrics as the
    summary has them; assigning to any field is refused."""
    key = "sk-frozen-record-KEY-5150"
    monkeypatch.setenv("EP_FROZEN_KEY", key)
    p = argparse.ArgumentParser()
    endpoint_run.add_arguments(p)
    with FakeServer(token_interval_s=0.002, api_key=key, metrics=True) as server:
        args = p.parse_args(["--url", server.url, "--requests", "4", "--concurrency", "2",
                             "--api-key-env", "EP_FROZEN_KEY", "--scrape-hz", "4"])
        section, summary = endpoint_run.run(args, TraceRecorder())
    blob = json.dumps(section)
    assert key not in blob and key not in json.dumps(summary)
    snapshot = read_endpoint_section(json.loads(blob))
    assert isinstance(snapshot, EndpointSnapshot) and isinstance(snapshot.run, EndpointRecord)
    assert snapshot.settings["url"] == server.url and snapshot.settings["concurrency"] == 2
    assert snapshot.settings["api_key_env"] == "EP_FROZEN_KEY"
    assert [r.index for r in snapshot.run.results] == [r["index"] for r in summary["requests"]]
    assert [r.output_tokens for r in snapshot.run.results] == [
        r["output_tokens"] for r in summary["requests"]]
    assert snapshot.run.metrics["completed"] == summary["completed"] == 4
    assert snapshot.run.model == summary["model"] == "fake-model"
    assert snapshot.sweep is None and snapshot.side_by_side is None
    for name in ("settings", "run", "sweep", "side_by_side"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(snapshot, name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.run.model = "another"


def test_an_empty_section_is_a_lab_that_had_not_run():
    assert read_endpoint_section(endpoint_section(dict(ENDPOINT_DEFAULTS), None)) == \
        EndpointSnapshot(ENDPOINT_DEFAULTS, None, None, None)


def test_seeded_fuzz_gives_a_named_value_error_or_reads(section):
    paths = [p for p in json_paths(section) if p and not (
        len(p) > 5 and isinstance(p[-1], int) and p[-1] > 2)]  # a few items of each list
    rng = random.Random(20261201)

    def case(raw: bytes):
        def call():
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):
                return
            try:
                read_endpoint_section(data)
            except ValueError as e:
                assert str(e).startswith("labs.endpoint"), str(e)

        return call

    cases = []
    for _ in range(400):
        label, raw = mutate_json(section, rng, paths)
        cases.append((label, case(raw)))
    run_cases(cases, allowed=()).check()


@pytest.mark.parametrize("path,value,message", [
    (("state", "run", "requests", 0, "chunk_times_s"), "reversed", "chunk_times_s: expected "
     "non-decreasing"),
    (("state", "run", "requests", 1, "token_source"), "guess", "requests[1].token_source"),
    (("state", "run", "requests", 0, "chunk_tokens"), [1], "one count per chunk time"),
    (("state", "run", "server_metrics", "common", "nonsense"), [], "common['nonsense']: "
     "expected one of running"),
    (("state", "sweep", "points", 0, "strategy"), "wild", "points[0].strategy"),
    (("settings", "api"), "embeddings", "settings.api: expected one of"),
    (("settings", "scrape_hz"), 0.5, "settings.scrape_hz: expected 0 (off) or 1..4"),
    (("metrics", "ttft_s", "p99"), "slow", "metrics.ttft_s.p99"),
    (("state", "run", "agreement"), {"client_ttft_mean_s": 0.1},
     "run.agreement: missing field 'client_output_tokens_per_s'"),
    (("state", "run", "agreement", "server_ttft_mean_s"), -1.0,
     "agreement.server_ttft_mean_s: expected a finite number >= 0"),
    (("state", "run", "requests", 0, "output_tokens"), 2**70,
     "requests[0].output_tokens: expected an integer >= 0"),
    (("state", "run", "requests", 0, "error"), "\ud800", "requests[0].error: expected text"),
    (("state", "run", "server_metrics", "common", "running", 0), [0.0],
     "common['running'][0]: expected [time_s, value]"),
    (("state", "side_by_side", "columns", "endpoint", "metrics", "failed"), -1,
     "columns['endpoint'].metrics.failed: expected an integer >= 0"),
    (("state", "sweep", "slo_s", "ttft_s"), 0, "sweep.slo_s: SLO ttft_s must be a positive"),
    (("settings", "requests"), 2**70, "settings.requests: expected an integer in 1..10,000"),
])
def test_named_errors(section, path, value, message):
    bad = copy.deepcopy(section)
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = target[path[-1]][::-1] if value == "reversed" else value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        read_endpoint_section(bad)


def test_segments_wait_then_stream_and_name_failures(record):
    seg = request_segments(record.results)
    by_row = {}
    for row, state, a, b in seg.rows():
        by_row.setdefault(row, []).append((state, a, b))
    for row, r in enumerate(record.results):
        states = [s for s, _a, _b in by_row[row]]
        if r.ok:
            assert states == [WAITING, DECODE]
            (_, a0, b0), (_, a1, b1) = by_row[row]
            assert (a0, b0, a1, b1) == (r.send_s, r.chunk_times_s[0], r.chunk_times_s[0],
                                        r.chunk_times_s[-1])
        elif r.error_kind == "http":
            assert states == [PREEMPTED]
        else:  # reset after 3 chunks: waited, streamed, then failed
            assert r.error_kind == "reset" and states == [WAITING, DECODE, PREEMPTED]
    cut = dataclasses.replace(record.results[0], error="cancelled after 0 chunks",
                              error_kind="cancelled", chunk_times_s=(), chunk_tokens=())
    assert [s for _r, s, _a, _b in request_segments([cut]).rows()] == [STALLED]


def test_each_request_has_its_own_track(record):
    recorder = TraceRecorder()
    endpoint_trace(recorder, record, offset_s=1.0)
    events = recorder.events()
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {f"request r{i:04d}" for i in range(5)} <= tracks
    spans = [e for e in events if e.get("ph") == "X"]
    assert {e["name"] for e in spans} == {"waiting", "streaming", "failed"}
    assert any("HTTP 500" in e["args"].get("error", "") for e in spans)
    assert any(e["name"] == "server running" for e in events if e.get("ph") == "C")
