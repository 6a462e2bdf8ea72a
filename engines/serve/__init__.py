"""Serving: request streams, a continuous-batching scheduler, and the metrics that score them.

- `metrics`: serving metrics (TTFT, TPOT, ITL, e2e, throughput, goodput) as vLLM defines them,
  and `knee` (a rate sweep's highest rate meeting the SLOs).
- `workload`: seeded request streams (Poisson, gamma, all-at-zero) and JSONL traces.
- `request`: `Request` (frozen, as submitted) and `Sequence` (the scheduler's working state).
- `scheduler`: `Scheduler` with the `continuous` (vLLM v1, chunked prefill),
  `continuous-no-chunking` (vLLM v0, prefill-first) and `static` batching policies.
- `policies`: those policies, one small class each, and the admission orders (`fcfs`, `lpm`);
  `forks`: parallel sampling's forks of a running sequence.
- `engine`: `ServingEngine`, the loop (admit arrivals, schedule, execute, update) handing out
  one IterationRecord per iteration; `bench_simulator` (simulated requests per wall second).
- `records`: `RequestInfo` (per request) and `IterationRecord` / `PrefillSlice` (per
  iteration), the frozen records the engine hands out and snapshots store.
- `executors`: one per clock: `ModelExecutor` (the real model, wall clock) and `SimulatedExecutor`
  (the roofline time of each flat batch, no model); `simulated_pool_blocks` sizes the pool.
"""
