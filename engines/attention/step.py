"""What every attention engine shares: the step record and the counting.

An engine is a plain object over one Q, K, V ([H, N, d] fp32, or [N, d] for one head):
`step()` runs one tile and returns a frozen `AttentionStep`; `done`, `step_index` and
`steps_total` say where it is; `run()` steps to the end. Bytes are counted where the
algorithm loads or stores a tile (`_read`, `_write`), in the tensors' element size; the
on-chip working set is what one step holds at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

NAIVE, TILED, SPLIT_K = "naive", "tiled", "split_k"
EXECUTIONS = (NAIVE, TILED, SPLIT_K)


@dataclass(frozen=True, eq=False)
class AttentionStep:
    """One step (one tile) of one execution, and the totals after it.

    `q_rows` and `k_rows` are the [start, end) rows of the tiles the step touched (naive's
    softmax reads whole rows of S: k_rows is then (0, N)); for split-K the query row is N-1
    and `k_rows` the chunk (the combine: (0, N)). `score_tile` holds the step's
    scaled scores (masked keys -inf), `m_rows` / `l_rows` the running max and sum of the Q
    tile's rows after it (split-K: every chunk's partial m and ℓ, NaN until computed)."""

    execution: str
    step: int  # 0-based index of this step
    steps_total: int
    head: int
    phase: str  # naive: scores | softmax | output; tiled: tile; split_k: chunk | combine
    q_rows: tuple[int, int]
    k_rows: tuple[int, int]
    step_bytes_read: int
    step_bytes_written: int
    on_chip_bytes: int
    bytes_read: int  # totals so far
    bytes_written: int
    flops: int
    score_tile: np.ndarray | None = None
    m_rows: np.ndarray | None = None
    l_rows: np.ndarray | None = None

    @property
    def done(self) -> bool:
        return self.step + 1 == self.steps_total


def as_heads(x: torch.Tensor, name: str, dtypes=(torch.float32,)) -> torch.Tensor:
    """[N, d] -> [1, N, d]; [H, N, d] as it is; of one of `dtypes` (by default fp32 only: what
    the checks hold to 1e-5)."""
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if x.dim() != 3:
        raise ValueError(f"{name}: expected [N, d] or [H, N, d], got shape {tuple(x.shape)}")
    if x.dtype not in dtypes:
        names = " or ".join(str(t).removeprefix("torch.") for t in dtypes)
        raise ValueError(f"{name}: expected {names}, got {x.dtype}")
    return x


class SteppedAttention:
    """The base of the three engines: the inputs, the plan of steps and the counters."""

    execution = ""

    def __init__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, br: int, bc: int,
                 causal: bool = False, scale: float | None = None) -> None:
        self.q, self.k, self.v = as_heads(q, "q"), as_heads(k, "k"), as_heads(v, "v")
        if not (self.q.shape == self.k.shape == self.v.shape):
            raise ValueError(f"q, k, v must have one shape, got {tuple(self.q.shape)}, "
                             f"{tuple(self.k.shape)}, {tuple(self.v.shape)}")
        if br < 1 or bc < 1:
            raise ValueError(f"tile sizes must be at least 1, got Br={br}, Bc={bc}")
        self.n_heads, self.n, self.d = self.q.shape
        self.br, self.bc, self.causal = int(br), int(bc), bool(causal)
        self.scale = self.d ** -0.5 if scale is None else float(scale)
        self.element_bytes = self.q.element_size()
        self.bytes_read = self.bytes_written = self.flops = 0
        self.peak_on_chip_bytes = 0
        self.step_index = 0
        self._plan = iter(self.plan())  # lazily: N = 16k in 1-row tiles is 268M steps
        self.steps_total = self.count_steps()
        self._step_read = self._step_written = 0

    def plan(self):
        """The steps in order, each a tuple the subclass's `_run_step` understands."""
        raise NotImplementedError

    def count_steps(self) -> int:
        """How many steps `plan` yields (without walking it)."""
        raise NotImplementedError

    def _run_step(self, item) -> dict:
        """Run one planned step; returns the record's fields beyond the counters."""
        raise NotImplementedError

    @property
    def done(self) -> bool:
        return self.step_index >= self.steps_total

    def _read(self, elements: int) -> None:
        self._step_read += elements * self.element_bytes

    def _write(self, elements: int) -> None:
        self._step_written += elements * self.element_bytes

    def step(self) -> AttentionStep:
        if self.done:
            raise RuntimeError(f"{self.execution}: all {self.steps_total} steps have run")
        self._step_read = self._step_written = 0
        threads = torch.get_num_threads()
        # One thread: a tile's products are far too small to split, and on a shared 2-core
        # machine the thread hand-off cost ~5.9 ms per 64×64 tile against 16 µs on one
        # thread (measured, torch 2.13).
        torch.set_num_threads(1)
        try:
            fields = self._run_step(next(self._plan))
        finally:
            torch.set_num_threads(threads)
        on_chip = fields.pop("on_chip_elements") * self.element_bytes
        self.flops += fields.pop("flops")
        self.bytes_read += self._step_read
        self.bytes_written += self._step_written
        self.peak_on_chip_bytes = max(self.peak_on_chip_bytes, on_chip)
        record = AttentionStep(self.execution, self.step_index, self.steps_total,
                               step_bytes_read=self._step_read,
                               step_bytes_written=self._step_written, on_chip_bytes=on_chip,
                               bytes_read=self.bytes_read, bytes_written=self.bytes_written,
                               flops=self.flops, **fields)
        self.step_index += 1
        return record

    def run(self) -> AttentionStep | None:
        """Step to the end; the last record (None if nothing was left to run)."""
        last = None
        while not self.done:
            last = self.step()
        return last


def tile_ranges(n: int, size: int) -> list[tuple[int, int]]:
    """[start, end) of each tile of `size` rows over n rows; the last one ragged."""
    return [(s, min(n, s + size)) for s in range(0, n, size)]


def causal_mask(scores: torch.Tensor, r0: int, c0: int) -> torch.Tensor:
    """Scores of a tile at rows r0.., keys c0.. with every key after its query set to -inf."""
    rows = torch.arange(r0, r0 + scores.shape[-2]).unsqueeze(-1)
    cols = torch.arange(c0, c0 + scores.shape[-1]).unsqueeze(0)
    return scores.masked_fill(cols > rows, float("-inf"))


def as_array(x: torch.Tensor) -> np.ndarray:
    return x.detach().to("cpu").numpy().copy()
