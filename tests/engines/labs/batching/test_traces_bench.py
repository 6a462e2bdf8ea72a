"""`bench traces` on a tiny input: every figure present, counts exact (no wall-clock assert)."""

from __future__ import annotations

from inferlab.engines.labs.batching.traces_bench import run_traces_bench
from inferlab.engines.serve.traces.bench import write_mooncake_jsonl
from inferlab.engines.serve.traces.stream import read_trace


def test_traces_bench_tiny():
    out = run_traces_bench(csv_rows=500, mooncake_s=5.0)
    assert out["csv_rows"] == 500 and out["csv_rows_per_s"] > 0
    assert out["mooncake_requests"] > 0
    assert out["mooncake_simulated_requests_per_s_of_wall"] > 0
    assert 0 <= out["mooncake_prefix_hit_rate"] <= out["mooncake_trace_hit_rate_unbounded"] <= 1
    assert out["mooncake_iterations"] > 0 and out["mooncake_simulated_s"] > 0


def test_generated_mooncake_reads_back(tmp_path):
    path = tmp_path / "m.jsonl"
    n = write_mooncake_jsonl(path, duration_s=20.0, seed=3)
    rows = list(read_trace(path))
    assert len(rows) == n > 0
    assert all(r.block_size == 512 and len(r.block_hashes) == -(-r.input_tokens // 512)
               for r in rows)
    assert rows[-1].arrival_s < 20.0
