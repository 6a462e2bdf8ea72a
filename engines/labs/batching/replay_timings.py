"""Each request's token times read back from a run's iteration records (a snapshot's).

An iteration gives a request one output token, at the iteration's end, when it

    decodes it              (the request is in `decodes`: it fed its last token back), or
    ends its (re)prefill    (a prefill chunk reaching start + n_tokens >= the tokens to
                            prefill: the prompt, or after a recompute preemption the prompt
                            plus the tokens it had put out, as the scheduler re-prefills them)

which is what the scheduler records as the token's time, so the timings summarize to the
run's own metrics (`engines.serve.metrics.summarize`). A snapshot that kept only every k-th
iteration of a huge run cannot be read this way: ValueError says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferlab.engines.serve.metrics import RequestTiming
from inferlab.engines.serve.records import IterationRecord, RequestInfo


def request_timings(requests: Sequence[RequestInfo],
                    iterations: Sequence[IterationRecord]) -> list[RequestTiming]:
    """One RequestTiming per request (in `requests`' order) from `iterations`, which must be
    consecutive (ValueError otherwise, or when an iteration names an unknown request)."""
    indices = [it.index for it in iterations]
    if indices and indices != list(range(indices[0], indices[0] + len(indices))):
        raise ValueError("the snapshot kept only some of the run's iterations (a huge run): "
                         "its requests' token times cannot be read back")
    prompt = {r.request_id: r.prompt_tokens for r in requests}
    to_prefill = dict(prompt)
    times: dict[str, list[float]] = {rid: [] for rid in prompt}

    def known(rid: str, i: int) -> str:
        if rid not in prompt:
            raise ValueError(f"iteration {i} names request {rid!r}, not in the requests")
        return rid

    for it in iterations:
        for rid in it.preempted:  # recompute: prompt + outputs so far are prefilled again
            to_prefill[known(rid, it.index)] = prompt[rid] + len(times[rid])
        for p in it.prefills:
            if p.start + p.n_tokens >= to_prefill[known(p.request_id, it.index)]:
                times[p.request_id].append(it.end_s)
        for rid in it.decodes:
            times[known(rid, it.index)].append(it.end_s)
    return [RequestTiming(r.arrival_s, tuple(times[r.request_id]), r.prompt_tokens)
            for r in requests]
