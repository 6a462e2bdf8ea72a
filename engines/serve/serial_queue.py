"""A server that runs ONE request at a time, first come first served, with no batching, on
the simulated clock: what llama-cpp-python's server is (its lock admits one completion; a
waiting request waits whole, `--interrupt_requests False`), with its costs a `FittedCost`.

    start_i   = max(arrival_i, end_{i-1})
    reused_i  = min(lcp(prompt_i, prompt_{i-1}), n_i - 1)      with prefix_reuse, else 0
    first_i   = start_i + prefill_s(n_i - reused_i)             the first token
    end_i     = first_i + Σ_{k=1}^{m_i-1} decode_s(n_i + k)      the last of m_i tokens
    TTFT_i    = first_i - arrival_i,  E2E_i = end_i - arrival_i

reused: llama.cpp keeps the previous request's tokens in its one context and evaluates only
what follows their longest common prefix with the new prompt (never the prompt's last token,
which it must evaluate for its logits). That is one sequence of any length, compared token by
token, not a pool of blocks: why this is its own small simulation rather than the serving
engine at max batch 1, whose prefix cache keeps every block of every request.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from inferlab.engines.sequences import common_prefix_len
from inferlab.engines.serve.fitted_cost import FittedCost


@dataclass(frozen=True)
class SerialRequest:
    """arrival_s on the run's clock; prompt: its tokens (anything comparable, one per
    token); output_tokens ≥ 1."""

    arrival_s: float
    prompt: tuple[Hashable, ...]
    output_tokens: int


@dataclass(frozen=True)
class SerialTiming:
    """One request's times on the simulated clock (module doc)."""

    arrival_s: float
    start_s: float
    first_token_s: float
    end_s: float
    reused_tokens: int

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.arrival_s


def simulate_serial(requests: Sequence[SerialRequest], cost: FittedCost,
                    prefix_reuse: bool = True) -> list[SerialTiming]:
    """Each request's times, in the order given (first come first served: sorted by arrival,
    ties in the order given)."""
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
    out: list[SerialTiming | None] = [None] * len(requests)
    free_s, previous = 0.0, ()
    for i in order:
        r = requests[i]
        if r.output_tokens < 1 or not r.prompt:
            raise ValueError(f"request {i}: needs a prompt and at least 1 output token")
        n = len(r.prompt)
        reused = min(common_prefix_len(previous, r.prompt), n - 1) if prefix_reuse else 0
        start = max(r.arrival_s, free_s)
        first = start + cost.prefill_s(n - reused)
        end = first + sum(cost.decode_s(n + k) for k in range(1, r.output_tokens))
        out[i] = SerialTiming(r.arrival_s, start, first, end, reused)
        free_s, previous = end, r.prompt
    return out
