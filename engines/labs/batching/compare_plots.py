"""The batching lab's side of a snapshot comparison's plots (engines.trace.overlay).

From the snapshot's record (records.BatchingSnapshot): the TTFT, TPOT and E2E latency CDFs of every request
that finished (token times read back from the iterations: replay_timings), and the batch size
and KV pool use of every iteration against time since the run's start (its first arrival or
first iteration, whichever is earlier: two runs aligned at t = 0).
"""

from __future__ import annotations

from inferlab.engines.labs.batching.compare import latency_cdf
from inferlab.engines.labs.batching.records import BatchingSnapshot
from inferlab.engines.labs.batching.replay_timings import request_timings
from inferlab.engines.labs.batching.timeline import iteration_strips
from inferlab.engines.serve.metrics import e2e_s, tpot_s, ttft_s
from inferlab.engines.trace.overlay import Curve, Plot

LATENCIES = (("TTFT", "time to first token", ttft_s, True),
             ("TPOT", "time per output token after the first", tpot_s, False),
             ("E2E", "end-to-end latency", e2e_s, True))
"""(name, what it is, its formula, log x): TPOT spans a few milliseconds (no decade to mark
on a log axis), as the lab's own Compare tab draws it."""


def latency_cdf_plots(timings) -> list[Plot]:
    """The TTFT, TPOT and E2E CDFs (ms) of the timings that succeeded (the endpoint lab's
    too: its requests as the client timed them)."""
    done = [t for t in timings if t.ok]
    plots = []
    for name, what, latency, log_x in LATENCIES:
        x, y = latency_cdf([1e3 * v for v in map(latency, done) if v is not None])
        plots.append(Plot(f"{name} CDF ({what})", f"{name} (ms)", "fraction of requests",
                          (Curve(name, x, y, steps=True),), log_x=log_x))
    return plots


def batching_plots(snapshot: BatchingSnapshot) -> list[Plot]:
    """The plots of a snapshot's record (read_batching_section); none without a run."""
    requests, iterations = snapshot.requests, snapshot.iterations
    if not requests or not iterations:
        return []
    plots = latency_cdf_plots(request_timings(requests, iterations))
    strips = iteration_strips(iterations)
    t0_s = min(min(r.arrival_s for r in requests), iterations[0].start_s)
    t_s = strips.end_s - t0_s
    plots.append(Plot("Batch size per iteration", "time since the run's start (s)",
                      "sequences in the batch",
                      (Curve("batch size", t_s, strips.batch_size, steps=True),)))
    plots.append(Plot("KV pool use per iteration", "time since the run's start (s)",
                      "KV blocks in use (%)",
                      (Curve("KV use", t_s, 100.0 * strips.kv_usage, steps=True),)))
    return plots
