"""The cluster lab's trace events: each instance's iterations on a track of its own, each KV
transfer on the link's track (times on the simulated clock, shifted by the run's start)."""

from __future__ import annotations

from inferlab.engines.cluster.cluster import ClusterResult


def trace_cluster(recorder, result: ClusterResult, offset_s: float = 0.0) -> None:
    """Each instance's iterations on a track of its own ("instance 3 · decode"), each KV
    transfer on the link's track."""
    for inst in result.instances:
        track = f"instance {inst.index} · {inst.role}"
        for rec in inst.iterations:
            recorder.add_span(f"iteration {rec.index}", offset_s + rec.start_s,
                              offset_s + rec.end_s, cat="cluster", track=track,
                              args={"prefill_tokens": rec.prefill_tokens,
                                    "decode_tokens": rec.decode_tokens})
    for t in result.transfers:
        recorder.add_span(f"KV {t.request_id}", offset_s + t.start_s, offset_s + t.end_s,
                          cat="kv-transfer", track="link",
                          args={"src": t.src, "dst": t.dst, "bytes": t.n_bytes})
