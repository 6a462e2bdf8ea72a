"""The endpoint lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_endpoint_section`'s EndpointSnapshot: the TTFT, TPOT and E2E CDFs of the requests
that succeeded, as the client timed them (from its send, chunk by chunk:
`StreamResult.to_timing`, what the run's metrics summarize), drawn as the batching lab draws
its own.
"""

from __future__ import annotations

from inferlab.engines.labs.batching.compare_plots import latency_cdf_plots
from inferlab.engines.labs.endpoint.records import EndpointSnapshot
from inferlab.engines.trace.overlay import Plot


def endpoint_plots(snapshot: EndpointSnapshot) -> list[Plot]:
    """`snapshot`: read_endpoint_section's. No plot without a run."""
    record = snapshot.run
    if record is None or not record.results:
        return []
    return latency_cdf_plots([r.to_timing() for r in record.results
                              if r.error_kind != "cancelled"])
