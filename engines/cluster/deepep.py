"""Our all-to-all closed form against DeepEP's measured low-latency kernels.

DeepEP V1's documentation (docs/legacy.md, kept in assets/references/deepep-v1-low-latency.json
with the commit it was read at) measures, for EP 8 … 256 on H800s with 400 Gb/s InfiniBand,
the dispatch and combine of 128 tokens per GPU (hidden 7168, top-8, FP8 dispatch, BF16
combine): each row's time and its bottleneck bandwidth. For every row we compute
all_to_all.dispatch_bytes / combine_bytes for those 128 tokens, and all_to_all_s at that
row's measured bandwidth with ONE fixed latency α for every row (default: the
infiniband-400g link preset's, 2 µs), and divide by DeepEP's time.

What the ratio shows: DeepEP's bandwidth counts every top-k copy, the GPU's own included, at
7,408 B (FP8 values, scales and 16 B of metadata); our closed form sends (1 − 1/EP) of them
at 7,392 B. So the ratio is about (1 − 1/EP)·7392/7408 + α / DeepEP's time: below 1 at EP 8
(where 1/8 of the copies stay home), near 1 from EP 32 up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from inferlab.engines.cluster.all_to_all import all_to_all_s, combine_bytes, dispatch_bytes
from inferlab.engines.cluster.links import load_link_preset
from inferlab.engines.presets import parse_json, preset_dir

REFERENCE = "deepep-v1-low-latency"
DEFAULT_LINK = "infiniband-400g"


def deepep_low_latency_table() -> dict:
    """The reference JSON (assets/references/deepep-v1-low-latency.json) as a dict."""
    origin = f"assets/references/{REFERENCE}.json"
    data = parse_json((preset_dir("references") / f"{REFERENCE}.json").read_text("utf-8"),
                      origin)
    if data.get("columns") != ["ep", "dispatch_latency_us", "dispatch_bandwidth_gb_per_s",
                               "combine_latency_us", "combine_bandwidth_gb_per_s"]:
        raise ValueError(f"{origin}: field 'columns' is not the table's five columns")
    return data


@dataclass(frozen=True)
class DeepEPRow:
    """One EP degree: our dispatch/combine bytes and seconds at DeepEP's measured bandwidth,
    DeepEP's measured seconds, and ours / theirs."""

    ep: int
    dispatch_bytes: float
    dispatch_s: float
    deepep_dispatch_s: float
    dispatch_ratio: float
    combine_bytes: float
    combine_s: float
    deepep_combine_s: float
    combine_ratio: float

    def to_dict(self) -> dict:
        return asdict(self)


def deepep_low_latency_comparison(latency_s: float | None = None) -> list[DeepEPRow]:
    """Per row of DeepEP's V1 low-latency table: all_to_all_s(dispatch_bytes(128 tokens),
    the row's dispatch bandwidth, α) / the row's dispatch time, and the same for combine.
    α: `latency_s`, default the infiniband-400g link preset's latency (the same for every
    row; no per-row constant)."""
    table = deepep_low_latency_table()
    alpha = load_link_preset(DEFAULT_LINK).latency_s if latency_s is None else latency_s
    n, k, h = table["tokens"], table["top_k"], table["hidden"]
    out = []
    for ep, d_us, d_gb, c_us, c_gb in table["rows"]:
        d_bytes = dispatch_bytes(n, k, h, ep, table["dispatch_dtype"])
        c_bytes = combine_bytes(n, k, h, ep, table["combine_dtype"])
        d_s = all_to_all_s(d_bytes, d_gb * 1e9, alpha)
        c_s = all_to_all_s(c_bytes, c_gb * 1e9, alpha)
        out.append(DeepEPRow(ep, d_bytes, d_s, d_us * 1e-6, d_s / (d_us * 1e-6),
                             c_bytes, c_s, c_us * 1e-6, c_s / (c_us * 1e-6)))
    return out


def deepep_part() -> dict:
    """`inferlab bench moe`'s figure: ep_all_to_all_vs_deepep_low_latency, the ratio farthest
    from 1 over every row's dispatch and combine (goal: every row within 0.15 of 1), with the
    rows themselves."""
    rows = deepep_low_latency_comparison()
    ratios = [r for row in rows for r in (row.dispatch_ratio, row.combine_ratio)]
    return {"ep_all_to_all_vs_deepep_low_latency": max(ratios, key=lambda r: abs(r - 1.0)),
            "deepep_low_latency_rows": [row.to_dict() for row in rows]}
