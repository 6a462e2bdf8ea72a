"""The layout search: every layout of a kind under a GPU budget, each one full simulated run
of the same requests, scored by goodput per GPU (goodput.score_run); the grid the heat
map draws, and the best cell.

    replicas  rows: tensor degree t (1, 2, 4, …: those that split the model's heads);
              columns: replicas r = 1, 2, 4, … while r × t ≤ the budget
    pd        rows: t; columns: the share of prefill instances (1:3, 1:2, 1:1, 2:1, 3:1 of
              P:D) over all the budget's instances, budget / t (each at least one of each)
    ep        rows: (t, e) — expert-parallel degree e = 2, 4, … dividing the experts, and
              the attention's t = 1, 2, … dividing e; columns: replicas r = 1, 2, 4, …
              while r × e ≤ the budget, each with EPLB_SLOTS redundant slots per GPU and
              dual-batch overlap off and on. TP × EP × DP: t, e, r·e/t.

Given the hardware (and dtype), a cell whose weights leave no KV block on a GPU is None, and
a row with no such cell is left out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from inferlab.engines.cluster.cluster import ClusterConfig, run_cluster
from inferlab.engines.cluster.ep_executor import ep_pool_blocks
from inferlab.engines.cluster.fanout import Fanout, run_probes
from inferlab.engines.cluster.goodput import DEFAULT_ATTAINMENT, score_run
from inferlab.engines.cluster.layout import EP, PD, REPLICAS, Layout
from inferlab.engines.hardware.presets import HardwarePreset
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.parallel import gpu_share
from inferlab.engines.serve.metrics import SLO

SEARCH_KINDS = (REPLICAS, PD, EP)
EPLB_SLOTS = (0, 1, 2)
"""Redundant expert slots per GPU the ep search tries (0: no balancer)."""
PD_SHARES = ((1, 3), (1, 2), (1, 1), (2, 1), (3, 1))
"""P:D ratios the pd search tries: the prefill instances' share P / (P + D)."""


def tensor_degrees(cfg: ModelConfig, budget: int) -> list[int]:
    """1, 2, 4, … up to the budget, where the model's heads split t ways."""
    out, t = [], 1
    while t <= budget:
        try:
            gpu_share(cfg, t)
            out.append(t)
        except ValueError:
            pass
        t *= 2
    return out


def expert_degrees(cfg: ModelConfig, budget: int) -> list[int]:
    """2, 4, … up to the budget, where the model's experts split e ways (none: a dense model)."""
    out, e = [], 2
    while cfg.is_moe and e <= min(budget, cfg.n_experts):
        if cfg.n_experts % e == 0:
            out.append(e)
        e *= 2
    return out


def ep_fits(cfg: ModelConfig, hardware: HardwarePreset | None, layout: Layout,
            dtype: str = "fp16") -> bool:
    """An expert-parallel group's weights leave at least one KV block per GPU (always True
    without hardware to judge by)."""
    if hardware is None:
        return True
    try:
        ep_pool_blocks(cfg, hardware, layout.tp, layout.ep, layout.eplb_slots, dtype=dtype)
    except ValueError:
        return False
    return True


def ep_grid(cfg: ModelConfig, budget: int, hardware: HardwarePreset | None = None,
            dtype: str = "fp16") -> tuple[list[int], list[str], list[list[Layout | None]]]:
    """The ep search's grid (module docstring): (each row's t, column labels, layouts)."""
    replicas = [2 ** c for c in range(int(math.log2(budget)) + 1)]
    columns = [(r, slots, dbo) for r in replicas for slots in EPLB_SLOTS
               for dbo in (False, True)]
    labels = [f"{r} × group{f', +{s} EPLB' if s else ''}{', DBO' if dbo else ''}"
              for r, s, dbo in columns]
    heads = set(tensor_degrees(cfg, budget))
    tps, grid = [], []
    for e in expert_degrees(cfg, budget):
        for t in (t for t in sorted(heads) if e % t == 0):
            row = []
            for r, slots, dbo in columns:
                cell = None
                if r * e <= budget:
                    cell = Layout(EP, tp=t, ep=e, replicas=r, eplb_slots=slots,
                                  dual_batch_overlap=dbo)
                    cell = cell if ep_fits(cfg, hardware, cell, dtype) else None
                row.append(cell)
            if any(row):
                tps.append(t)
                grid.append(row)
    used = [j for j in range(len(columns)) if any(row[j] for row in grid)]  # e.g. 16 × EP8
    return tps, [labels[j] for j in used], [[row[j] for j in used] for row in grid]


def search_grid(kind: str, cfg: ModelConfig, budget: int, hardware: HardwarePreset | None = None,
                dtype: str = "fp16") -> tuple[list[int], list[str], list[list[Layout | None]]]:
    """(rows: t values, column labels, layouts[row][column] or None where none fits).
    `hardware`, `dtype`: the ep grid leaves out the layouts whose weights do not fit."""
    if kind not in SEARCH_KINDS:
        raise ValueError(f"search kind must be one of {', '.join(SEARCH_KINDS)}, got {kind!r}")
    if kind == EP:
        return ep_grid(cfg, budget, hardware, dtype)
    rows = tensor_degrees(cfg, budget)
    if kind == REPLICAS:
        n_cols = int(math.log2(budget)) + 1
        columns = [2 ** c for c in range(n_cols)]
        grid = [[Layout(REPLICAS, tp=t, replicas=r) if r * t <= budget else None
                 for r in columns] for t in rows]
        return rows, [f"{r} replica{'s' if r > 1 else ''}" for r in columns], grid
    grid = []
    for t in rows:
        n = budget // t
        row, seen = [], set()
        for p_share, d_share in PD_SHARES:
            p = round(n * p_share / (p_share + d_share))
            p = min(max(p, 1), n - 1)
            cell = None
            if n >= 2 and (p, n - p) not in seen:
                seen.add((p, n - p))
                cell = Layout(PD, tp=t, prefill=p, decode=n - p)
            row.append(cell)
        grid.append(row)
    return rows, [f"P:D {p}:{d}" for p, d in PD_SHARES], grid


@dataclass(frozen=True)
class SearchCell:
    row: int
    column: int
    layout: Layout
    goodput_per_gpu: float
    attainment: float
    ttft_p90_s: float | None
    tpot_p90_s: float | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SearchResult:
    kind: str
    budget: int
    tps: tuple[int, ...]
    columns: tuple[str, ...]
    cells: tuple[SearchCell, ...]
    best: int | None  # index into cells (None: no layout reached the goal)
    # where the probes ran (Fanout.describe): not part of the result's equality
    executor: str = field(default="serial", compare=False)


def probe_layout(base: ClusterConfig, requests, slo: SLO, attainment: float, row: int,
                 column: int, layout: Layout) -> SearchCell:
    """One probe of the search: `layout` runs the requests to their end and is scored
    (module-level, so that Ray can pickle it by name)."""
    score = score_run(run_cluster(replace(base, layout=layout), requests), slo, attainment)
    return SearchCell(row, column, layout, score.goodput_per_gpu, score.attainment,
                      score.metrics.ttft_s.p90, score.metrics.tpot_s.p90)


def search_layouts(base: ClusterConfig, kind: str, budget: int, requests, slo: SLO,
                   attainment: float = DEFAULT_ATTAINMENT, progress=None,
                   fanout: Fanout | None = None) -> SearchResult:
    """Run every layout of the grid on `requests`, serially or fanned out (`fanout`, e.g.
    fanout.choose_fanout(): Ray tasks; the same cells either way); best = the highest
    goodput per GPU (ties: higher attainment, then fewer GPUs). `progress(fraction,
    message)` after each probe."""
    fanout = Fanout() if fanout is None else fanout
    executor = fanout.describe()
    tps, columns, grid = search_grid(kind, base.model, budget, base.hardware, base.dtype)
    todo = [(i, j, lay) for i, row in enumerate(grid) for j, lay in enumerate(row) if lay]
    on_probe = None
    if progress is not None:
        progress(0.0, f"{executor}: {len(todo)} layouts to probe")

        def on_probe(done: int, total: int) -> None:
            progress(done / total, f"{done}/{total} layouts probed, {executor}")

    cells = run_probes(probe_layout, todo, shared=(base, requests, slo, attainment),
                       fanout=fanout, labels=[lay.label for _, _, lay in todo],
                       progress=on_probe)
    ranked = [k for k, c in enumerate(cells) if c.goodput_per_gpu > 0]
    best = max(ranked, key=lambda k: (cells[k].goodput_per_gpu, cells[k].attainment,
                                      -cells[k].layout.n_gpus), default=None)
    return SearchResult(kind, budget, tuple(tps), tuple(columns), tuple(cells), best,
                        executor)
