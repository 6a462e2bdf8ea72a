"""What verifying K drafts costs the target on this machine: v(K), the time of a target step
scoring K + 1 tokens over that of a step scoring 1, the same cached context.

    v(K) = t(step of K + 1 tokens) / t(step of 1 token)      (>= 1)

Speculative decoding's predicted speedup E / (K·c + v(K)) (statistics.speedup_model) and the
runtime bench's `verify_cost_ratio_k4` both read it from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferlab.engines.hardware.timing import median_call_s
from inferlab.engines.model.runner import ModelRunner

VERIFY_CONTEXT_TOKENS = 64


def step_seconds(model, n_tokens: int, repeats: int = 7,
                 context_tokens: int = VERIFY_CONTEXT_TOKENS) -> float:
    """Median seconds of one `ModelRunner.step` scoring `n_tokens` new tokens (all their
    logits, as a K + 1 verification does) after `context_tokens` cached ones."""
    runner = ModelRunner(model, max_tokens=context_tokens + n_tokens + 16,
                         enable_prefix_caching=False)
    prompt = [(7 * i + 3) % model.config.vocab_size for i in range(context_tokens)]
    runner.add("s", prompt)
    runner.step(["s"])
    drafts = [(11 * i + 5) % model.config.vocab_size for i in range(n_tokens)]

    def once() -> None:
        runner.append_tokens("s", drafts)
        runner.step(["s"], logits=[n_tokens])
        runner.truncate("s", context_tokens)

    return median_call_s(once, model.device, repeats=repeats, warmup=1)


def verify_cost_ratios(model, ks: Sequence[int], repeats: int = 7) -> dict[int, float]:
    """v(K) for each K: t(a step scoring K + 1 tokens) / t(a step scoring 1), the same context,
    on this machine now (at least 1: a longer step never costs less than a shorter one)."""
    one = step_seconds(model, 1, repeats)
    return {k: max(1.0, step_seconds(model, k + 1, repeats) / one) for k in sorted(set(ks))}
