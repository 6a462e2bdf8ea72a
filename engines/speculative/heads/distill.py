"""Self-distillation at scale: many sequences continued greedily by the target in one batch,
their last-layer hidden states kept as they are computed (no second pass).

`ModelRunner` steps up to `batch` live sequences together (continuous batching: a sequence
that finishes leaves its slot and its cache blocks to the next prompt, whose whole prompt
runs as a chunk of the next step). For each sequence the tokens the target RAN are kept
with what it computed for them:

    tokens  x_0 .. x_{T-1}          the prompt, then every answer token but the last
    hidden  f_0 .. f_{T-1}          `ModelRunner.keep_hidden`'s residual stream
    greedy  g_t = argmax p(· | x_0 .. x_t)     the step's own logits: g_{T-1} is the answer's
                                    last token, or the end of turn that stopped it

so the answer holds up to `max_new_tokens` run tokens (+ the final greedy one), and a
sequence with `max_new_tokens` 0 (a shipped text read as it is) is its prompt alone.
A step's logits are each sequence's last row; a prompt's other positions take their greedy
tokens (the labels there) from the hidden states the step kept, a few hundred rows per lm_head
product, so no [prompt tokens, vocab] tensor is ever made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.speculative.heads.sequence import TrainingSequence

BLOCK_TOKENS = 16
HEAD_ROWS = 256
"""Rows per lm_head product when taking greedy tokens from hidden states (`greedy_tokens`):
logits are never held for a whole batch of prompts ([rows, vocab] fp32 is 13 GB for 128
prompts of 100 tokens under Gemma 3's 262,144-token vocabulary)."""


def greedy_tokens(target: Llama, hidden: torch.Tensor) -> torch.Tensor:
    """argmax of the target's logits for each row of `hidden` (its residual stream after the
    last layer, before the final norm), HEAD_ROWS rows per product: int64 [rows]."""
    parts = [target.head_logits(hidden[i:i + HEAD_ROWS]).argmax(-1)
             for i in range(0, hidden.shape[0], HEAD_ROWS)]
    return torch.cat(parts).cpu().to(torch.int64) if parts else torch.zeros(0, dtype=torch.int64)


@dataclass
class _Live:
    name: str
    tokens: list[int]
    max_new: int
    hidden: list[torch.Tensor] = field(default_factory=list)
    greedy: list[int] = field(default_factory=list)
    generated: int = 0


@dataclass(frozen=True)
class DistillStats:
    """What one `distill` call did: `run_tokens` every token the target ran (all sequences),
    `answer_tokens` those the target wrote itself, over `seconds` of wall time."""

    sequences: int
    run_tokens: int
    answer_tokens: int
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.run_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def answer_tokens_per_s(self) -> float:
        return self.answer_tokens / self.seconds if self.seconds > 0 else 0.0


def distill(target: Llama, items: Sequence[tuple[str, Sequence[int], int]], batch: int,
            stop_token_ids: Sequence[int] = (),
            progress: Callable[[str, int, int, float | None], None] | None = None,
            should_stop: Callable[[], bool] | None = None
            ) -> tuple[list[TrainingSequence], DistillStats]:
    """Each (name, prompt ids, max_new_tokens) continued greedily, at most `batch` at a
    time; the sequences in `items` order and what the run did. `progress("generate", done,
    total, None)` as sequences finish; `should_stop` checked before each step."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    t0 = time.perf_counter()
    stops = set(stop_token_ids)
    limit = target.config.max_position
    longest = 1
    for name, ids, max_new in items:
        if len(ids) < 1:
            raise ValueError(f"{name}: empty prompt")
        if len(ids) + max_new > limit:
            raise ValueError(f"{name}: {len(ids)} prompt tokens + {max_new} new pass the "
                             f"model's context of {limit}")
        longest = max(longest, len(ids) + max_new)
    per_seq = -(-longest // BLOCK_TOKENS)
    runner = ModelRunner(target, n_blocks=per_seq * min(batch, max(1, len(items))),
                         block_size=BLOCK_TOKENS, enable_prefix_caching=False)
    runner.keep_hidden = True
    done: dict[int, TrainingSequence] = {}
    live: dict[int, _Live] = {}
    fresh: set[int] = set()  # sequences whose prompt runs in the next step
    queue = list(range(len(items)))[::-1]
    run_tokens = answer_tokens = 0

    def admit() -> None:
        while queue and len(live) < batch:
            i = queue.pop()
            name, ids, max_new = items[i]
            live[i] = _Live(name, [int(t) for t in ids], int(max_new))
            runner.add(i, live[i].tokens)
            fresh.add(i)

    admit()
    with torch.inference_mode():
        while live:
            check_stop(should_stop)
            order = list(live)
            counts = [len(live[i].tokens) if i in fresh else 1 for i in order]
            # each sequence's last row from the step; a prompt's earlier rows from its
            # hidden states, HEAD_ROWS at a time (`greedy_tokens`)
            lasts = runner.step(order).argmax(-1).tolist()
            hidden = runner.last_hidden
            row = 0
            for i, n, last in zip(order, counts, lasts, strict=True):
                s = live[i]
                rows = hidden[row:row + n]
                s.hidden.append(rows.float().cpu())
                if n > 1:
                    s.greedy.extend(greedy_tokens(target, rows[:-1]).tolist())
                s.greedy.append(last)
                row += n
                run_tokens += n
            fresh.clear()
            for i in order:
                s = live[i]
                nxt = s.greedy[-1]
                if nxt in stops or s.generated >= s.max_new:
                    runner.free(i)
                    del live[i]
                    done[i] = TrainingSequence(
                        s.name, torch.tensor(s.tokens, dtype=torch.int64),
                        torch.cat(s.hidden), torch.tensor(s.greedy, dtype=torch.int64))
                    answer_tokens += s.generated
                    if progress is not None:
                        progress("generate", len(done), len(items), None)
                else:
                    s.tokens.append(nxt)
                    s.generated += 1
                    runner.append(i, nxt)
            admit()
    seqs = [done[i] for i in range(len(items))]
    return seqs, DistillStats(len(seqs), run_tokens, answer_tokens, time.perf_counter() - t0)
