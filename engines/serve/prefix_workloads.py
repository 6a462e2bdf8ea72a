"""Seeded workloads whose prompts share content, the traffic prefix caches are for, and the
reference for what a prefix cache can hit on them.

Every generator returns WorkloadRequests in arrival order (stable on ties: the order below),
each with `prompt_token_ids`: made-up ids in 1..vocab_size − 1 (0 is left out because the
simulated executor samples id 0, so its answers never match a made-up answer below).

A prompt is a run of segments (a system prompt, examples, a document, a question, an answer,
a tool call, a tool result). Each segment's first id is one no other segment of the scenario
starts with (drawn without replacement), the rest are seeded random ids. So two prompts agree
exactly on the segments they share and part at the first token of the first one they do not:
the sharing each generator documents is exact, and `longest_prefix_matches` measures it.

L_i (issue 20's definition) is the longest common prefix of request i's prompt with any
EARLIER request's PROMPT, in arrival order. Outputs do not count: an engine generates its own
answers, and a multi-turn or agent scenario puts MADE-UP answer ids into the next prompt; so
an answer segment is shared only by the later prompts that contain it, never with the output
a real model produced (a cache that also keeps outputs may match one token more by chance,
1 in vocab_size per turn on a real model, never on the simulator). With nothing evicted and
requests that do not overlap in time, a prefix cache computes at least one token per prompt
(for the logits), so its hits are `expected_cached_tokens`: min(L_i, len_i − 1) with token
granularity (a radix tree, page 1), floor(min(L_i, len_i − 1) / B) · B with blocks of B.

Sizes are in tokens; each segment's length is drawn uniformly in size·(1 ± jitter) (rounded,
at least 1; jitter 0 = exactly size), so shared lengths are not all multiples of a block.
Start times (a conversation's first turn, a group's arrival) are Poisson at rate_per_s, the
first at 0; rate_per_s None puts them all at t = 0. Arrivals, lengths and ids draw on three
independent streams spawned from the seed. The defaults fit a CPU run of SmolLM2-135M
(context 2048: prompts of a few hundred tokens); `make_scenario(name, scale=…)` multiplies
every *_tokens size for the simulator (scale 4 still fits Llama-3-8B's 8192).
"""

from __future__ import annotations

import bisect
import inspect
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from inferlab.engines.serve.workload import (
    MAX_REQUESTS,
    MAX_TOKEN_ID,
    MAX_TOKENS,
    WorkloadError,
    WorkloadRequest,
)

DEFAULT_VOCAB_SIZE = 49_152
"""SmolLM2's vocabulary; below Llama-3's 128,256, so the same ids run on both."""
MAX_SCENARIO_TOKENS = 50_000_000
"""Prompt tokens of all a scenario's requests together; beyond this, sizes are a mistake."""


# ---- the pieces every generator uses ----------------------------------------------------------

class _Streams:
    """The seeded draws of one scenario: arrivals, segment lengths, token ids."""

    def __init__(self, seed: int, vocab_size: int, jitter: float) -> None:
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise WorkloadError(f"field 'seed' must be an integer ≥ 0, got {seed!r}")
        _check_int("vocab_size", vocab_size, low=2, high=MAX_TOKEN_ID + 1)
        if not isinstance(jitter, (int, float)) or not 0 <= jitter < 1:
            raise WorkloadError(f"field 'jitter' must be a number in [0, 1), got {jitter!r}")
        self.arrivals, self.lengths, self.ids = (
            np.random.Generator(np.random.PCG64(s))
            for s in np.random.SeedSequence(int(seed)).spawn(3))
        self.vocab_size, self.jitter = int(vocab_size), float(jitter)
        self._used: set[int] = set()  # segments' first ids so far
        self._markers = (self.ids.permutation(self.vocab_size - 1) + 1  # 1..vocab−1, shuffled
                         if self.vocab_size <= 2**20 else None)  # None: drawn, repeats redrawn

    def high(self, size: int) -> float:
        """An upper bound on length(size)."""
        return size * (1 + self.jitter) + 1

    def check_budget(self, longest_prompt: float, total: float) -> None:
        """Refuse sizes whose longest prompt or whose sum of prompts would be too long,
        before anything is built."""
        if longest_prompt > MAX_TOKENS:
            raise WorkloadError(f"these sizes make prompts of up to {longest_prompt:,.0f} "
                                f"tokens, over the {MAX_TOKENS:,}-token limit")
        if total > MAX_SCENARIO_TOKENS:
            raise WorkloadError(f"these sizes make up to {total:,.0f} prompt tokens in all, "
                                f"over the {MAX_SCENARIO_TOKENS:,}-token limit for a scenario")

    def length(self, size: int) -> int:
        """A segment length around `size` (0 stays 0)."""
        if size == 0 or self.jitter == 0:
            return size
        low = max(1, round(size * (1 - self.jitter)))
        return int(self.lengths.integers(low, max(low, round(size * (1 + self.jitter))),
                                         endpoint=True))

    def segment(self, n: int) -> tuple[int, ...]:
        """n ids starting with an id no other segment starts with (empty for n = 0)."""
        if n == 0:
            return ()
        if len(self._used) == self.vocab_size - 1:
            raise WorkloadError(f"the scenario needs more segments than vocab_size "
                                f"({self.vocab_size:,}) has ids to start them apart")
        if self._markers is not None:
            first = int(self._markers[len(self._used)])
        else:
            first = int(self.ids.integers(1, self.vocab_size))
            while first in self._used:
                first = int(self.ids.integers(1, self.vocab_size))
        self._used.add(first)
        rest = self.ids.integers(1, self.vocab_size, size=n - 1)
        return (first, *rest.tolist())

    def starts_s(self, n: int, rate_per_s: float | None) -> list[float]:
        """n start times: 0, then Poisson gaps at rate_per_s; all 0 when rate_per_s is None."""
        if rate_per_s is None:
            return [0.0] * n
        gaps = self.arrivals.exponential(1.0 / rate_per_s, size=n - 1)
        return np.concatenate(([0.0], np.cumsum(gaps))).tolist()


def _check_int(name: str, v, low: int = 1, high: int = MAX_TOKENS) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not low <= v <= high:
        raise WorkloadError(f"field '{name}' must be an integer in {low}..{high:,}, got {v!r}")
    return int(v)


def _check_rate(rate_per_s) -> None:
    if rate_per_s is not None and (not isinstance(rate_per_s, (int, float))
                                   or isinstance(rate_per_s, bool)
                                   or not math.isfinite(rate_per_s) or rate_per_s <= 0):
        raise WorkloadError(f"field 'rate_per_s' must be a finite number > 0 or None, "
                            f"got {rate_per_s!r}")


def _check_gap(name: str, v) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
        raise WorkloadError(f"field '{name}' must be a finite number > 0, got {v!r}")
    return float(v)


def _request(arrival_s: float, prompt: tuple[int, ...], output_tokens: int,
             prefix_id: int) -> WorkloadRequest:
    if len(prompt) > MAX_TOKENS:
        raise WorkloadError(f"a prompt of {len(prompt):,} tokens is over the "
                            f"{MAX_TOKENS:,}-token limit")
    return WorkloadRequest(arrival_s, len(prompt), output_tokens, prefix_id=prefix_id,
                           prompt_token_ids=prompt)


def _in_arrival_order(requests: list[WorkloadRequest]) -> list[WorkloadRequest]:
    return sorted(requests, key=lambda r: r.arrival_s)  # stable: ties keep generation order


# ---- growing prompts: multi-turn chat and agent loops ----------------------------------------

def _growing(streams: _Streams, n: int, steps: int, shared_tokens: int, first_tokens: int,
             output_tokens: int, added_tokens: int, gap_s: float,
             rate_per_s: float | None) -> list[WorkloadRequest]:
    """n sessions of `steps` requests: step 1 = shared + first; step s = step s−1's prompt +
    its answer (made-up, output_tokens of step s−1 long) + a new segment (added_tokens)."""
    hi = streams.high
    head, grow = hi(shared_tokens) + hi(first_tokens), hi(output_tokens) + hi(added_tokens)
    streams.check_budget(head + (steps - 1) * grow,
                         n * (steps * head + grow * steps * (steps - 1) / 2))
    shared = streams.segment(streams.length(shared_tokens))
    starts = streams.starts_s(n, rate_per_s)
    out = []
    for session in range(n):
        prompt = shared + streams.segment(streams.length(first_tokens))
        for step in range(steps):
            answer = streams.length(output_tokens)
            out.append(_request(starts[session] + step * gap_s, prompt, answer, session))
            if step + 1 < steps:
                prompt = (prompt + streams.segment(answer)
                          + streams.segment(streams.length(added_tokens)))
    return _in_arrival_order(out)


def multi_turn(seed: int = 0, n: int = 8, *, turns: int = 4, system_tokens: int = 64,
               question_tokens: int = 64, answer_tokens: int = 48, turn_gap_s: float = 8.0,
               rate_per_s: float | None = 0.5, jitter: float = 0.5,
               vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[WorkloadRequest]:
    """n conversations of `turns` turns (prefix_id = the conversation).

    Turn 1's prompt = the system prompt (ONE, shared by every conversation) + a question;
    turn t's prompt = turn t−1's prompt + turn t−1's answer (made-up ids, as many as turn
    t−1's output_tokens) + a new question. A conversation starts at a Poisson time and turn t
    arrives (t − 1)·turn_gap_s later (set it longer than a turn takes, for requests that do
    not overlap). So L = 0 for the first request; L = the system prompt's length for a later
    conversation's first turn; L = len(turn t−1's prompt) for turn t ≥ 2 (its whole previous
    prompt, but not the answer, which no earlier prompt holds)."""
    _check_sizes(per_n="turns", n=n, turns=turns, system_tokens=system_tokens,
                 question_tokens=question_tokens, answer_tokens=answer_tokens,
                 rate_per_s=rate_per_s)
    streams = _Streams(seed, vocab_size, jitter)
    return _growing(streams, n, turns, system_tokens, question_tokens, answer_tokens,
                    question_tokens, _check_gap("turn_gap_s", turn_gap_s), rate_per_s)


def agent(seed: int = 0, n: int = 4, *, steps: int = 6, tools_tokens: int = 256,
          task_tokens: int = 64, call_tokens: int = 24, result_tokens: int = 64,
          step_gap_s: float = 4.0, rate_per_s: float | None = 0.5, jitter: float = 0.5,
          vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[WorkloadRequest]:
    """n agent loops of `steps` steps (prefix_id = the agent): a growing tool transcript.

    Step 1's prompt = the tool definitions (ONE block, shared by every agent) + the agent's
    task; step s's prompt = step s−1's prompt + step s−1's tool call (made-up ids, as many as
    its output_tokens, around call_tokens) + the tool's result (around result_tokens). An
    agent starts at a Poisson time and step s arrives (s − 1)·step_gap_s later. So L = 0 for
    the first request; L = the tool definitions' length for a later agent's first step;
    L = len(step s−1's prompt) for step s ≥ 2."""
    _check_sizes(per_n="steps", n=n, steps=steps, tools_tokens=tools_tokens,
                 task_tokens=task_tokens, call_tokens=call_tokens, result_tokens=result_tokens,
                 rate_per_s=rate_per_s)
    streams = _Streams(seed, vocab_size, jitter)
    return _growing(streams, n, steps, tools_tokens, task_tokens, call_tokens, result_tokens,
                    _check_gap("step_gap_s", step_gap_s), rate_per_s)


# ---- one shared block and a question: few-shot and document QA -------------------------------

def _shared_block(streams: _Streams, n: int, n_blocks: int, block_tokens: int,
                  question_tokens: int, output_tokens: int,
                  rate_per_s: float | None) -> list[WorkloadRequest]:
    prompt = streams.high(block_tokens) + streams.high(question_tokens)
    streams.check_budget(prompt, n * prompt + n_blocks * streams.high(block_tokens))
    blocks = [streams.segment(streams.length(block_tokens)) for _ in range(n_blocks)]
    starts = streams.starts_s(n, rate_per_s)
    picks = streams.lengths.integers(0, n_blocks, size=n).tolist()
    return [_request(starts[i], blocks[p] + streams.segment(streams.length(question_tokens)),
                     streams.length(output_tokens), p)
            for i, p in enumerate(picks)]


def few_shot(seed: int = 0, n: int = 32, *, examples_tokens: int = 384,
             question_tokens: int = 32, output_tokens: int = 32, n_prefixes: int = 1,
             rate_per_s: float | None = 2.0, jitter: float = 0.5,
             vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[WorkloadRequest]:
    """n requests, each = one of n_prefixes blocks of examples (picked uniformly, seeded;
    prefix_id = the block) + its own question, at Poisson arrivals. So L = 0 for the first
    request of each block, and L = that block's length for every later one."""
    _check_sizes(n=n, examples_tokens=examples_tokens, question_tokens=question_tokens,
                 output_tokens=output_tokens, n_prefixes=n_prefixes, rate_per_s=rate_per_s)
    return _shared_block(_Streams(seed, vocab_size, jitter), n, n_prefixes, examples_tokens,
                         question_tokens, output_tokens, rate_per_s)


def doc_qa(seed: int = 0, n: int = 16, *, document_tokens: int = 1024,
           question_tokens: int = 32, output_tokens: int = 48, n_documents: int = 1,
           rate_per_s: float | None = 1.0, jitter: float = 0.5,
           vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[WorkloadRequest]:
    """n questions about one long document (or n_documents, picked uniformly, seeded;
    prefix_id = the document): prompt = the document + the question, at Poisson arrivals. So
    L = 0 for the first request on each document, and L = that document's length after."""
    _check_sizes(n=n, document_tokens=document_tokens, question_tokens=question_tokens,
                 output_tokens=output_tokens, n_documents=n_documents, rate_per_s=rate_per_s)
    return _shared_block(_Streams(seed, vocab_size, jitter), n, n_documents, document_tokens,
                         question_tokens, output_tokens, rate_per_s)


# ---- branches of one prefix: parallel sampling and tree-of-thought ---------------------------

def parallel(seed: int = 0, n: int = 4, *, branches: int = 4, prefix_tokens: int = 256,
             branch_tokens: int = 16, output_tokens: int = 64,
             rate_per_s: float | None = 0.5, branch_gap_s: float = 0.0, jitter: float = 0.5,
             vocab_size: int = DEFAULT_VOCAB_SIZE) -> list[WorkloadRequest]:
    """n groups of `branches` requests arriving together (one Poisson time per group, branch
    k of a group branch_gap_s·k after it; prefix_id = the group): prompt = the group's prefix
    + the branch's own thought (branch_tokens; 0 = parallel sampling, every branch the same
    prompt). So L = 0 for a group's first branch; L = the prefix's length for the others
    (their whole prompt when branch_tokens = 0). Arriving together (branch_gap_s 0), the
    branches overlap in time: what a cache hits among them depends on the scheduler
    (branches prefilled in one batch find nothing cached yet); a branch_gap_s longer than a
    request takes gives the no-overlap case, where the hits are expected_cached_tokens."""
    _check_sizes(per_n="branches", n=n, branches=branches, prefix_tokens=prefix_tokens,
                 branch_tokens=branch_tokens, output_tokens=output_tokens,
                 rate_per_s=rate_per_s, zero_ok=("branch_tokens",))
    if not isinstance(branch_gap_s, (int, float)) or isinstance(branch_gap_s, bool) \
            or not math.isfinite(branch_gap_s) or branch_gap_s < 0:
        raise WorkloadError(f"field 'branch_gap_s' must be a finite number ≥ 0, "
                            f"got {branch_gap_s!r}")
    streams = _Streams(seed, vocab_size, jitter)
    prompt = streams.high(prefix_tokens) + streams.high(branch_tokens)
    streams.check_budget(prompt, n * branches * prompt)
    starts = streams.starts_s(n, rate_per_s)
    out = []
    for group in range(n):
        prefix = streams.segment(streams.length(prefix_tokens))
        for k in range(branches):
            out.append(_request(starts[group] + k * branch_gap_s,
                                prefix + streams.segment(streams.length(branch_tokens)),
                                streams.length(output_tokens), group))
    return _in_arrival_order(out)


def _check_sizes(*, per_n: str | None = None, rate_per_s=None,
                 zero_ok: tuple[str, ...] = (), **sizes) -> None:
    """Counts (n, turns, ...): 1..MAX_REQUESTS, and n × sizes[per_n] requests at most
    MAX_REQUESTS; *_tokens: 1..MAX_TOKENS (0 allowed for the shared segments system and tools
    and the names in zero_ok); rate_per_s: > 0 or None."""
    for name, v in sizes.items():
        if name.endswith("_tokens"):
            low = 0 if name in ("system_tokens", "tools_tokens") + zero_ok else 1
            _check_int(name, v, low=low)
        else:
            _check_int(name, v, high=MAX_REQUESTS)
    if per_n is not None and sizes["n"] * sizes[per_n] > MAX_REQUESTS:
        raise WorkloadError(f"n × {per_n} = {sizes['n'] * sizes[per_n]:,} requests, over the "
                            f"{MAX_REQUESTS:,}-request limit")
    _check_rate(rate_per_s)


# ---- the table ---------------------------------------------------------------------------------

SCENARIOS: dict[str, Callable[..., list[WorkloadRequest]]] = {
    "multi-turn": multi_turn,
    "few-shot": few_shot,
    "doc-qa": doc_qa,
    "parallel": parallel,
    "agent": agent,
}
"""Scenario name -> generator(seed, n, **sizes). Each generator's defaults fit a CPU run of
SmolLM2-135M; make_scenario scales them up."""


def make_scenario(name: str, seed: int = 0, n: int | None = None, scale: float = 1.0,
                  **overrides) -> list[WorkloadRequest]:
    """SCENARIOS[name]'s requests: `n` (None: the generator's default), every *_tokens
    default multiplied by `scale` (rounded, at least 1 where it was), then `overrides` (any
    keyword of the generator, taken as given)."""
    if name not in SCENARIOS:
        raise WorkloadError(f"unknown scenario {name!r}; the scenarios are "
                            f"{', '.join(SCENARIOS)}")
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) \
            or not math.isfinite(scale) or scale <= 0:
        raise WorkloadError(f"field 'scale' must be a finite number > 0, got {scale!r}")
    gen = SCENARIOS[name]
    params = inspect.signature(gen).parameters
    unknown = sorted(set(overrides) - set(params) - {"seed", "n"})
    if unknown:
        raise WorkloadError(f"scenario {name!r} has no parameter {', '.join(unknown)}; it "
                            f"takes {', '.join(p for p in params if p not in ('seed', 'n'))}")
    kwargs = {k: max(1 if p.default else 0, round(p.default * scale))
              for k, p in params.items() if k.endswith("_tokens")}
    if n is not None:
        kwargs["n"] = n
    return gen(seed, **(kwargs | overrides))


# ---- the reference: what each prompt shares with earlier ones --------------------------------

def longest_prefix_matches(prompts: Iterable[Sequence[int]]) -> list[int]:
    """L_i for every prompt, in the order given (arrival order): the longest common prefix of
    prompt i with ANY earlier prompt (0 for the first).

    The earlier prompts are kept sorted; the one sharing the longest prefix with a new prompt
    is its predecessor or its successor in that order (a prefix shared with any other lies
    between them), so each prompt costs one binary search of tuple comparisons and two
    common-prefix scans: O(total tokens · log n) in C-speed comparisons."""
    keys: list[tuple[int, ...]] = []
    arrays: list[np.ndarray] = []
    out = []
    for p in prompts:
        arr = np.asarray(p, dtype=np.int64).reshape(-1)
        key = p if type(p) is tuple else tuple(arr.tolist())  # records hold tuples of ints
        k = bisect.bisect_left(keys, key)
        best = 0
        for j in (k - 1, k):
            if 0 <= j < len(keys):
                best = max(best, _common_prefix(arrays[j], arr))
        keys.insert(k, key)
        arrays.insert(k, arr)
        out.append(best)
    return out


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    m = min(len(a), len(b))
    differ = a[:m] != b[:m]
    first = int(np.argmax(differ)) if m else 0
    return first if m and differ[first] else m


def expected_cached_tokens(prompts: Iterable[Sequence[int]], block_size: int = 1) -> list[int]:
    """What a prefix cache hits on each prompt with nothing evicted and no overlap in time:
    min(L_i, len_i − 1) rounded down to whole blocks, floor(min(L_i, len_i − 1) / block_size)
    · block_size (block_size 1: a radix tree at token granularity; the last token is always
    computed, for the logits)."""
    _check_int("block_size", block_size, high=MAX_TOKENS)
    prompts = [tuple(p) for p in prompts]
    return [max(0, min(m, len(p) - 1)) // block_size * block_size
            for p, m in zip(prompts, longest_prefix_matches(prompts), strict=True)]
