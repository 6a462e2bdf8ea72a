"""The endpoint lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_endpoint_section`'s records: the TTFT, TPOT and E2E CDFs of the requests that
succeeded, as the client timed them (from its send, chunk by chunk: `StreamResult.to_timing`,
what the run's metrics summarize), drawn as the batching lab draws its own.
"""

from __future__ import annotations

from inferlab.engines.labs.batching.compare_plots import latency_cdf_plots
from inferlab.engines.trace.overlay import Plot


def endpoint_plots(read) -> list[Plot]:
    """`read`: what read_endpoint_section returns (settings, EndpointRecord or None, sweep,
    side by side). No plot without a run."""
    record = read[1]
    if record is None or not record.results:
        return []
    return latency_cdf_plots([r.to_timing() for r in record.results
                              if r.error_kind != "cancelled"])
