"""The trace readers' bench: `csv_rows_per_s` reads a generated Azure-format CSV (issue 43's
goal: ≥ 300,000 rows/s). Not yet a `bench traces` lab command."""

from __future__ import annotations

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


def csv_rows_per_s(n_rows: int = 1_000_000) -> dict:
    """Rows of a generated n_rows-row Azure CSV that read_trace yields per wall second."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "azure.csv"
        write_azure_csv(path, n_rows)
        t0 = time.perf_counter()
        n = sum(1 for _ in read_trace(path))
        wall_s = time.perf_counter() - t0
    return {"rows": n, "wall_s": wall_s, "csv_rows_per_s": n / wall_s}
