"""A request as submitted (`Request`, frozen) and its working state in the scheduler (`Sequence`).

The token bookkeeping is vLLM v1's: a sequence's tokens are its prompt then its outputs, and
`num_computed_tokens` of them have K/V in the cache. Each iteration computes some of the rest
(a prefill chunk, or the one token a decode feeds back); when every token is computed the
model samples the next one. The last sampled token is never computed until the next decode.

A preempted sequence loses its cache (recompute): `num_computed_tokens` drops to 0 and its
prompt for the re-prefill becomes prompt + outputs so far (`num_prefill_tokens`); the outputs
are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inferlab.engines.model.sampler import GREEDY, SamplingParams
from inferlab.engines.serve.token_ids import TokenIds

WAITING = "waiting"
RUNNING = "running"
PREEMPTED = "preempted"
FINISHED = "finished"

# why a sequence finished (vLLM's finish reasons)
LENGTH = "length"
"""It produced max_new_tokens."""
STOP = "stop"
"""It sampled an end-of-sequence id."""


@dataclass(frozen=True)
class Request:
    """What a client submits. `arrival_s` is on the run's clock (the workload's times).
    `prompt_ids` become a tuple of ints; a TokenIds (checked when it was made) is kept as it
    is, so a long trace prompt is not walked again."""

    request_id: str
    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    arrival_s: float = 0.0
    sampling: SamplingParams = GREEDY
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if type(self.prompt_ids) is not TokenIds:
            object.__setattr__(self, "prompt_ids", tuple(int(t) for t in self.prompt_ids))
        if not self.prompt_ids:
            raise ValueError(f"request {self.request_id!r} has an empty prompt")
        if self.max_new_tokens < 1:
            raise ValueError(
                f"request {self.request_id!r}: max_new_tokens must be >= 1, "
                f"got {self.max_new_tokens}"
            )


@dataclass(eq=False, slots=True)
class Sequence:
    """One request's life in the scheduler; only the scheduler changes it."""

    request: Request
    status: str = WAITING
    output_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    """Leading tokens of prompt + outputs whose K/V is in the cache."""
    num_prefill_tokens: int = 0
    """Tokens the current (re)prefill covers: the prompt, or prompt + outputs after a
    preemption."""
    token_times_s: list[float] = field(default_factory=list)
    """The run-clock time of every output token, in order."""
    first_scheduled_s: float | None = None
    finish_s: float | None = None
    finish_reason: str | None = None
    """LENGTH or STOP once finished."""
    preemptions: int = 0
    num_cached_tokens: int | None = None
    """Prompt tokens the prefix cache supplied when it was first scheduled (vLLM's
    num_cached_tokens); None until then."""
    parent_id: str | None = None
    """The sequence this one was forked from (parallel sampling), else None."""
    # the request's figures the scheduler reads for every sequence every step, kept here
    seq_id: str = field(init=False)
    num_prompt_tokens: int = field(init=False)
    max_new_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.seq_id = self.request.request_id
        self.num_prompt_tokens = len(self.request.prompt_ids)
        self.max_new_tokens = self.request.max_new_tokens
        if not self.num_prefill_tokens:
            self.num_prefill_tokens = self.num_prompt_tokens

    @property
    def token_ids(self) -> list[int]:
        """Prompt then outputs."""
        return [*self.request.prompt_ids, *self.output_ids]

    @property
    def prefill_token_ids(self):
        """The tokens the current (re)prefill covers: the prompt itself (no copy), or prompt +
        outputs after a preemption."""
        if self.num_prefill_tokens == self.num_prompt_tokens:
            return self.request.prompt_ids
        return self.token_ids[: self.num_prefill_tokens]

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + len(self.output_ids)

    @property
    def num_remaining_prefill_tokens(self) -> int:
        """Prefill tokens not computed yet (0 once the sequence decodes)."""
        return max(0, self.num_prefill_tokens - self.num_computed_tokens)

    @property
    def is_prefilling(self) -> bool:
        return self.num_computed_tokens < self.num_prefill_tokens

    @property
    def is_finished(self) -> bool:
        return self.status == FINISHED

    def __repr__(self) -> str:
        return (f"Sequence({self.seq_id!r}, {self.status}, computed {self.num_computed_tokens}"
                f"/{self.num_tokens}, outputs {len(self.output_ids)}"
                f"/{self.request.max_new_tokens})")
