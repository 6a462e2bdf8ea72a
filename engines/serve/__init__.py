"""Serving: request streams, a continuous-batching scheduler, and the metrics that score them.

- `metrics`: serving metrics (TTFT, TPOT, ITL, e2e, throughput, goodput) as vLLM defines them.
- `workload`: seeded request streams (Poisson, gamma, all-at-zero) and JSONL traces.
- `request`: `Request` (frozen, as submitted) and `Sequence` (the scheduler's working state).
- `scheduler`: `Scheduler` with the `continuous` (vLLM v1, chunked prefill),
  `continuous-no-chunking` (vLLM v0, prefill-first) and `static` batching policies.
"""
