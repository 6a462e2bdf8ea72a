"""A speculative step as trace events: its span with draft and verify inside, and counters."""

from __future__ import annotations

from inferlab.engines.speculative.decoder import SpeculativeStep


def speculative_trace_step(recorder, record: SpeculativeStep, start_s: float) -> float:
    """One step as a span from `start_s` (the recorder's clock) holding its draft and verify
    (the target's one forward) spans, and acceptance counters at its end; returns its end."""
    draft_end = start_s + record.draft_s
    end = draft_end + record.target_forward_s
    args = {"drafted": len(record.drafted), "accepted": record.n_accepted,
            "emitted": len(record.token_ids), "target_tokens": record.target_tokens}
    if record.tree_tokens:
        args["tree_nodes"] = len(record.tree_tokens)
    recorder.add_span(f"step {record.index}", start_s, end, cat="speculative", args=args)
    recorder.add_span("draft", start_s, draft_end, cat="speculative",
                      args={"drafted": len(record.drafted)})
    recorder.add_span("verify", draft_end, end, cat="speculative",
                      args={"target_tokens": record.target_tokens})
    recorder.counter("speculative tokens", {"drafted": len(record.drafted),
                                            "accepted": record.n_accepted,
                                            "emitted": len(record.token_ids)},
                     ts_s=end, cat="speculative")
    return end
