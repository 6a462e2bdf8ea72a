"""Simulator fidelity: the probe → fit → replay → simulate → compare path against a fake server
whose costs are known (a fixed TTFT and token pace, requests that never overlap), then once
against a real llama.cpp server (slow: the figures are finite and every request is counted;
the goal itself is the bench's to report)."""

from __future__ import annotations

import argparse
import math

import pytest

from inferlab.engines.endpoint import fidelity
from inferlab.engines.endpoint.fidelity import (
    fidelity_figures,
    finite_figures,
    measure_fidelity,
    probe_requests,
)
from inferlab.engines.endpoint.llama_server import llama_cpp_available
from inferlab.engines.labs.endpoint import bench
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from inferlab.engines.serve.traces.record import TraceRequest
from inferlab.engines.serve.traces.stream import read_trace
from inferlab.engines.serve.traces.text import prompt_text
from inferlab.engines.serve.workload import WorkloadRequest


def test_probe_prompts_are_their_length_and_share_nothing():
    reqs = probe_requests((16, 48, 96))
    assert [len(r.prompt.split()) for r in reqs] == [16, 48, 96]
    firsts = [r.prompt.split()[:2] for r in reqs]
    assert len({tuple(f) for f in firsts}) == 3


def test_the_path_against_a_server_of_known_costs(fake_server):
    """Fixed TTFT 0.2 s, 0.02 s a token, requests far apart: the fitted model is that
    server, so the simulated times are the measured ones up to the loopback's jitter; the
    second request repeats the first one's two blocks, which the simulation reuses."""
    server = fake_server(ttft_s=0.2, token_interval_s=0.02)
    records = [TraceRequest(0.0, 24, 5, (1, 2, 3), 8), TraceRequest(0.6, 20, 4, (1, 2, 9), 8),
               TraceRequest(1.1, 12, 3, (7,), 8)]
    work = [WorkloadRequest(r.arrival_s, r.input_tokens, r.output_tokens,
                            prompt=prompt_text(r, i)) for i, r in enumerate(records)]
    out = measure_fidelity(server.url, work, probe_prompt_tokens=(8, 16, 32))
    assert (out["fidelity_requests"], out["fidelity_failed"]) == (3, 0)
    a, b, c = out["fidelity_cost"]["prefill_coef"]
    assert a + b * 16 + c * 256 == pytest.approx(0.2, abs=0.05)
    assert out["fidelity_cost"]["decode_coef"][0] == pytest.approx(0.02, abs=0.01)
    rows = out["fidelity_per_request"]
    assert [r["reused_tokens"] for r in rows] == [0, 16, 0]
    assert [r["output_tokens"] for r in rows] == [5, 4, 3]
    assert out["fidelity_ttft_median_error"] < 0.15
    assert out["fidelity_e2e_median_error"] < 0.15
    assert finite_figures(out)


def test_without_llama_cpp_the_figures_say_so(monkeypatch):
    monkeypatch.setattr(fidelity, "llama_cpp_available", lambda: False)
    assert fidelity_figures() == {"fidelity_skipped": "llama-cpp-python not installed"}


def test_bench_endpoint_fidelity_runs_the_figures(monkeypatch):
    monkeypatch.setattr(bench, "fidelity_figures", lambda: {"fidelity_requests": 3})
    parser = argparse.ArgumentParser()
    bench.add_bench_arguments(parser)
    assert bench.bench(parser.parse_args(["--fidelity"])) == {
        "fidelity": {"fidelity_requests": 3}}


@pytest.mark.slow
@pytest.mark.skipif(not llama_cpp_available(), reason="llama-cpp-python is not installed")
def test_a_tiny_window_against_a_real_llama_cpp_server(tmp_path, smollm2_path):
    trace = tmp_path / "mooncake.jsonl"
    write_mooncake_jsonl(trace, duration_s=2.0, seed=0)
    window = (0.0, 0.6)
    expected = sum(1 for _ in read_trace(trace, window=window))
    out = fidelity_figures(trace, window_s=window, time_scale=8.0, model_path=smollm2_path,
                           probe_prompt_tokens=(16, 32, 64))
    assert expected >= 2
    assert out["fidelity_requests"] == out["fidelity_trace"]["trace_requests"] == expected
    assert out["fidelity_failed"] == 0 and finite_figures(out)
    assert len(out["fidelity_per_request"]) == expected
    for row in out["fidelity_per_request"]:
        assert 0 < row["ttft_s"] < row["e2e_s"] and math.isfinite(row["sim_e2e_s"])
    assert 0.2 < out["fidelity_probe_drift"] < 5
