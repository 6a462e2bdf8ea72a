"""One seeded fuzz campaign over JSONL trace files, shared by the trace reader's tests."""

from __future__ import annotations

import random
from collections.abc import Callable

from inferlab.engines.serve.workload import WorkloadError, WorkloadRequest, read_trace, write_trace
from tests.fuzz import run_cases


def fuzz_traces(tmp_path, rng: random.Random, make_file: Callable[[random.Random], tuple],
                n_cases: int, check: Callable[[WorkloadRequest], None] | None = None):
    """Each of `n_cases` files from `make_file(rng)` (label, bytes) reads as a WorkloadError
    or as requests in arrival order (each passing `check`) that write and read back equal.
    Returns run_cases' result, checked."""
    path, again = tmp_path / "fuzz.jsonl", tmp_path / "again.jsonl"

    def case(data: bytes):
        def call():
            path.write_bytes(data)
            reqs = read_trace(path)
            assert all(isinstance(r, WorkloadRequest) for r in reqs)
            assert [r.arrival_s for r in reqs] == sorted(r.arrival_s for r in reqs)
            if check is not None:
                for r in reqs:
                    check(r)
            write_trace(again, reqs)
            assert read_trace(again) == reqs
        return call

    cases = []
    for n in range(n_cases):
        label, data = make_file(rng)
        cases.append((f"case {n} ({label})", case(data)))
    result = run_cases(cases, allowed=(WorkloadError,))
    result.check()
    assert result.cases == n_cases
    return result
