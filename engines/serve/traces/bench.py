"""The trace readers' bench: `csv_rows_per_s` reads a generated Azure-format CSV (issue 43's
goal: ≥ 300,000 rows/s); `write_mooncake_jsonl` writes a Mooncake-format trace shaped like
Kimi's (engines/labs/batching/traces_bench.py runs it through the batching lab:
`inferlab bench traces`)."""

from __future__ import annotations

import math
import random
import tempfile
import time
from pathlib import Path

from inferlab.engines.serve.traces.stream import read_trace


def write_azure_csv(path: str | Path, n_rows: int) -> None:
    """n_rows requests 1.234 ms apart from 2023-11-16 18:15:46, lengths cycling, in
    Azure's format (7-decimal timestamps), written a block of rows at a time."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        start_s = 18 * 3600 + 15 * 60 + 46
        lines = []
        for i in range(n_rows):
            t_us10 = i * 12340  # units of 0.1 µs
            s, frac = divmod(t_us10, 10_000_000)
            day_s = start_s + s
            day, day_s = divmod(day_s, 86400)
            h, rest = divmod(day_s, 3600)
            lines.append(f"2023-11-{16 + day:02d} {h:02d}:{rest // 60:02d}:{rest % 60:02d}."
                         f"{frac:07d},{100 + i * 7919 % 8000},{1 + i * 104729 % 500}\n")
            if len(lines) == 10_000:
                f.writelines(lines)
                lines.clear()
        f.writelines(lines)


MOONCAKE_RATE_PER_S = 6.5
"""Kimi's published Mooncake trace: 23,608 requests in about an hour."""


def write_mooncake_jsonl(path: str | Path, duration_s: float = 600.0,
                         rate_per_s: float = MOONCAKE_RATE_PER_S, seed: int = 0,
                         prefixes: int = 64, conversations: int = 256) -> int:
    """A Mooncake-format trace of Poisson arrivals over `duration_s`, shaped like Kimi's
    (input median ~5k tokens, output median ~120; hash ids of 512-token blocks shared as in
    a chat service): each request starts with one of `prefixes` system prompts (1 to 8
    blocks, picked Zipf-like), and 40% of requests continue one of the last `conversations`
    conversations (its ids, then new ones). Returns the number of rows written."""
    rng = random.Random(seed)
    next_id = 0
    roots = []
    for _ in range(prefixes):
        n = rng.randint(1, 8)
        roots.append(list(range(next_id, next_id + n)))
        next_id += n
    weights = [1.0 / (k + 1) for k in range(prefixes)]
    recent: list[list[int]] = []
    t_s, rows = 0.0, 0
    with open(path, "w", encoding="utf-8") as f:
        while True:
            t_s += rng.expovariate(rate_per_s)
            if t_s >= duration_s:
                return rows
            if recent and rng.random() < 0.4:
                base = recent[rng.randrange(len(recent))]
            else:
                base = rng.choices(roots, weights)[0]
            input_tokens = min(max(int(rng.lognormvariate(math.log(5000), 0.8)), 1), 120_000)
            n_blocks = max(-(-input_tokens // 512), len(base) + 1)
            input_tokens = max(input_tokens, (n_blocks - 1) * 512 + 1)
            ids = base + list(range(next_id, next_id + n_blocks - len(base)))
            next_id += n_blocks - len(base)
            recent.append(ids)
            if len(recent) > conversations:
                recent.pop(0)
            output_tokens = min(max(int(rng.lognormvariate(math.log(120), 0.8)), 1), 4096)
            f.write(f'{{"timestamp": {round(t_s * 1000)}, "input_length": {input_tokens}, '
                    f'"output_length": {output_tokens}, "hash_ids": {ids}}}\n')
            rows += 1


def csv_rows_per_s(n_rows: int = 1_000_000) -> dict:
    """Rows of a generated n_rows-row Azure CSV that read_trace yields per wall second."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "azure.csv"
        write_azure_csv(path, n_rows)
        t0 = time.perf_counter()
        n = sum(1 for _ in read_trace(path))
        wall_s = time.perf_counter() - t0
    return {"rows": n, "wall_s": wall_s, "csv_rows_per_s": n / wall_s}
