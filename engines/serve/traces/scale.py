"""A trace's lengths shrunk for a small model on a CPU (SmolLM2's 2048-token context, a KV lab
run of a few hundred steps): inputs and the trace's block size by one factor, so every request
keeps its number of blocks and the trace its sharing; outputs by their own."""

from __future__ import annotations

import math

from inferlab.engines.serve.traces.record import TraceRequest


def scaled(record: TraceRequest, input_scale: float = 1.0, output_scale: float = 1.0,
           max_input_tokens: int | None = None, max_output_tokens: int | None = None
           ) -> TraceRequest:
    """`record` with shorter lengths:

        input_tokens   min(⌈n · input_scale⌉, max_input_tokens)
        block_size     max(1, round(B · input_scale))   (512 × 1/64 = 8: ⌈n/B⌉ blocks kept)
        output_tokens  min(⌈m · output_scale⌉, max_output_tokens)

    A zero length stays zero (the trace's empty request is still empty)."""
    if not (0 < input_scale <= 1 and 0 < output_scale <= 1):
        raise ValueError(f"length scales must be in (0, 1], got {input_scale!r} and "
                         f"{output_scale!r}")
    n = math.ceil(record.input_tokens * input_scale)
    m = math.ceil(record.output_tokens * output_scale)
    if max_input_tokens is not None:
        n = min(n, max_input_tokens)
    if max_output_tokens is not None:
        m = min(m, max_output_tokens)
    block = max(1, round(record.block_size * input_scale)) if record.block_size else 0
    return record._replace(input_tokens=n, output_tokens=m, block_size=block)
