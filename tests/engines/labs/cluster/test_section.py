"""The cluster lab's settings, snapshot section and `run`: a section reads back equal, every
mutation of one field is a ValueError naming it (seeded fuzz), the run's summary holds what
the CLI promises and agrees with the engine's formulas."""

from __future__ import annotations

import argparse
import dataclasses
import json
import random

import pytest

from inferlab.engines.labs.cluster import run as cluster_run
from inferlab.engines.labs.cluster.records import ClusterSnapshot, ClusterState
from inferlab.engines.labs.cluster.section import read_cluster_section
from inferlab.engines.labs.cluster.settings import CLUSTER_DEFAULTS, check_cluster_settings
from inferlab.engines.roofline.interconnect import kv_transfer_s
from inferlab.engines.serve.metrics import RequestTiming, summarize
from inferlab.engines.trace.recorder import TraceRecorder
from tests.fuzz import mutate_value, run_cases, sampled_paths


def run_args(*argv):
    p = argparse.ArgumentParser()
    cluster_run.add_arguments(p)
    return p.parse_args(["--requests", "40", "--rate", "20", *argv])


@pytest.fixture(scope="module")
def pd_run():
    recorder = TraceRecorder()
    section, summary = cluster_run.run(run_args("--layout", "pd", "--gpus", "4"), recorder)
    return section, summary, recorder


def test_summary_holds_the_cli_fields_and_the_formula(pd_run):
    section, summary, _ = pd_run
    json.dumps(summary)  # pure JSON
    link = summary["link"]
    assert set(link) >= {"bandwidth_bytes_per_s", "latency_s"}
    assert summary["layout"] == {"kind": "pd", "tp": 1, "replicas": 1, "prefill": 2,
                                 "decode": 2}
    kvb = summary["kv_bytes_per_token"]
    for r in summary["requests"]:
        assert r["instance"] in (0, 1)
        if r["decode_instance"] is not None:
            assert r["decode_instance"] in (2, 3)
            assert r["kv_transfer_s"] == pytest.approx(kv_transfer_s(
                kvb, r["prompt_tokens"], link["bandwidth_bytes_per_s"], link["latency_s"]))
    timings = [RequestTiming(r["arrival_s"], r["token_times_s"], r["prompt_tokens"])
               for r in summary["requests"]]
    again = summarize(timings).to_dict()
    for key in ("completed", "ttft_s", "tpot_s", "e2e_s", "output_tokens_per_s"):
        assert again[key] == summary["metrics"][key]
    roles = [i["role"] for i in summary["instances"]]
    assert roles == ["prefill", "prefill", "decode", "decode"]
    assert all(0 < i["utilization"] <= 1 for i in summary["instances"])


def test_the_trace_has_a_track_per_instance_and_the_link(pd_run):
    _, summary, recorder = pd_run
    names = {e["args"]["name"] for e in recorder.events() if e.get("ph") == "M"
             and e.get("name") == "thread_name"}
    assert {"instance 0 · prefill", "instance 3 · decode", "link"} <= names
    n_kv = sum(1 for e in recorder.events() if e.get("cat") == "kv-transfer")
    assert n_kv == sum(1 for r in summary["requests"] if r["decode_instance"] is not None)


def test_a_section_reads_back_equal(pd_run):
    section = json.loads(json.dumps(pd_run[0]))
    record = read_cluster_section(section)
    state, metrics = record.state, record.metrics
    assert record.search is None
    assert record.settings["layout"] == "pd"
    assert [r.to_dict() for r in state.requests] == section["state"]["requests"]
    assert json.loads(json.dumps(state.to_dict())) == section["state"]
    assert metrics["goodput_per_gpu"] == section["metrics"]["goodput_per_gpu"]


def test_the_headless_runs_section_reads_into_one_frozen_record(pd_run):
    section, summary, _ = pd_run
    record = read_cluster_section(json.loads(json.dumps(section)))
    assert isinstance(record, ClusterSnapshot) and isinstance(record.state, ClusterState)
    assert record.settings == check_cluster_settings(section["settings"])
    assert [i.role for i in record.state.instances] == [i["role"] for i in summary["instances"]]
    assert [r.request_id for r in record.state.requests] == [
        r["request_id"] for r in summary["requests"]]
    assert record.state.kv_bytes_per_token == summary["kv_bytes_per_token"]
    assert record.metrics["gpus"] == 4 and record.search is None
    for name in ("settings", "state", "metrics", "search"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.state.makespan_s = 0.0


def test_seeded_fuzz_every_field_gives_a_value_error_or_reads(pd_run):
    section = json.loads(json.dumps(pd_run[0]))
    paths = [p for p in sampled_paths(section) if p]
    rng = random.Random(22)
    cases = []
    for _ in range(300):
        label, bad = mutate_value(section, rng, paths)
        cases.append((label, lambda bad=bad: read_cluster_section(bad)))
    run_cases(cases, (ValueError,)).check()


@pytest.mark.parametrize("path,value,message", [
    (("state", "requests", 0, "instance"), 9, "requests[0].instance: no instance 9"),
    (("state", "transfers", 0, "end_s"), -1.0, "transfers[0]"),
    (("state", "instances", 1, "role"), "both", "instances[1]"),
    (("settings", "link"), "carrier-pigeon", "settings.link: expected one of"),
    (("settings", "tp"), 3, "settings.layout: 4 GPUs at t = 3"),
])
def test_named_errors(pd_run, path, value, message):
    bad = json.loads(json.dumps(pd_run[0]))
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_cluster_section(bad)


def test_settings_check_the_gpu_arithmetic():
    assert check_cluster_settings(dict(CLUSTER_DEFAULTS))["gpus"] == 8
    with pytest.raises(ValueError, match="do not split"):
        check_cluster_settings(dict(CLUSTER_DEFAULTS, layout="replicas", gpus=6, tp=4))
    with pytest.raises(ValueError, match="--gpus|GPUs"):
        cluster_run.settings_of(run_args("--layout", "pd", "--gpus", "1"))


def test_search_reports_a_grid_with_the_best_layout():
    section, summary = cluster_run.run(
        run_args("--search", "replicas", "--gpus", "4", "--serial"), TraceRecorder())
    assert summary["tp_rows"] == [1, 2, 4] and summary["executor"] == "serial"
    labels = {c["label"] for c in summary["cells"]}
    assert labels == {"1 × t1", "2 × t1", "4 × t1", "1 × t2", "2 × t2", "1 × t4"}
    best = max(summary["cells"], key=lambda c: c["goodput_per_gpu"])
    assert summary["best"] == best["label"]
    record = read_cluster_section(json.loads(json.dumps(section)))
    assert record.state is None and record.search == json.loads(json.dumps(summary))
    bad = json.loads(json.dumps(section))
    bad["state"]["search"]["best"] = "9 × t9"
    with pytest.raises(ValueError, match=r"state\.search\.best"):
        read_cluster_section(bad)


def test_a_long_run_reports_its_progress():
    told = []
    args = run_args("--layout", "replicas", "--gpus", "2")
    args.requests = 1200
    args.progress = lambda fraction, message: told.append((fraction, message))
    cluster_run.run(args, TraceRecorder())
    fractions = [f for f, _ in told]
    assert fractions == sorted(fractions) and fractions[-1] <= 1.0
    assert ("1,000 of 1,200 requests routed" in [m for _, m in told])
