"""The attention lab's closed forms with a snapshot's numbers (what its traffic panel shows):
the bytes each execution reads from and writes to main memory at the run's N, d, Br, Bc and
heads, and the stepped execution's count beside its closed form. The numbers come from
engines/attention/traffic.py, where the formulas live.
"""

from __future__ import annotations

import math

from inferlab.engines.attention.traffic import (
    naive_traffic,
    split_k_traffic,
    tiled_traffic,
    visible_columns,
)
from inferlab.engines.labs.attention.records import AttentionSnapshot
from inferlab.engines.roofline.units import format_bytes


def attention_formulas(read: AttentionSnapshot) -> list[tuple[str, str]]:
    """`read`: what read_attention_section returns. (formula, substituted) pairs; none
    without a run."""
    info, records = read.run, read.steps
    if info is None:
        return []
    n, d, h, e, br, bc = info.n, info.d, info.heads, info.element_bytes, info.br, info.bc
    hh = f"{h}·" if h > 1 else ""
    naive = naive_traffic(n, d, e, h)
    tiled = tiled_traffic(n, d, br, bc, info.causal, e, h)
    split = split_k_traffic(n, d, bc, e, h)
    splits = math.ceil(n / bc)
    # the keys each Q tile reads: all N, or (causal) up to its last row; Σᵢ colsᵢ = ⌈N/Br⌉·N
    cols = sum(visible_columns(min(n, r0 + br), n, bc, info.causal) for r0 in range(0, n, br))
    tiles = math.ceil(n / br)
    out = [
        ("naive reads H·(3Nd + 2N²)·e, writes H·(2N² + Nd)·e (S and P materialised)",
         f"reads {hh}(3·{n}·{d} + 2·{n}²)·{e} = {_b(naive.bytes_read)}; writes "
         f"{hh}(2·{n}² + {n}·{d})·{e} = {_b(naive.bytes_written)}"),
        ("tiled reads H·(Nd + 2d·Σᵢ colsᵢ)·e, writes H·Nd·e (FlashAttention-2)",
         f"⌈N/Br⌉ = {tiles} Q tiles, Σᵢ colsᵢ = {cols:,}"
         + (" (causal: K tiles past a Q tile's last row skipped)" if info.causal else "")
         + f": reads {hh}({n}·{d} + 2·{d}·{cols})·{e} = {_b(tiled.bytes_read)}; writes "
         f"{hh}{n}·{d}·{e} = {_b(tiled.bytes_written)}"),
        ("split-K reads H·(S·d + 2Nd + S·(d + 2))·e, writes H·(S·(d + 2) + d)·e, "
         "S = ⌈N/Bc⌉ (one decode row)",
         f"S = {splits}: reads {hh}({splits}·{d} + 2·{n}·{d} + {splits}·{d + 2})·{e} = "
         f"{_b(split.bytes_read)}; writes {hh}({splits}·{d + 2} + {d})·{e} = "
         f"{_b(split.bytes_written)}"),
    ]
    if records:
        last, form = records[-1], info.closed_forms[info.execution]
        out.append(("counted by the stepped execution, against its closed form",
                    f"{info.execution}, after step {last.step + 1:,} of "
                    f"{last.steps_total:,}: read "
                    f"{_b(last.bytes_read)} of {_b(form.bytes_read)}, written "
                    f"{_b(last.bytes_written)} of {_b(form.bytes_written)}"))
    return out


def _b(n: int) -> str:
    return f"{n:,} B ({format_bytes(n)})" if n >= 1024 else f"{n:,} B"
