"""The router's measured load as the cluster's expert load: tokens per expert per MoE layer,
summed over the decode steps of a MoE lab run saved as a snapshot (`inferlab run moe
--snapshot F`, or File ▸ Export in the window), read back through the MoE lab's own section
reader.

The simulated model is a preset, the measured one a model that really ran, so the two must
route alike: the same number of experts and the same top-k (the tiny MoE's 8 experts, top-2
are Mixtral-8x7B's). The measured layers repeat over the preset's MoE layers in order
(expert_load.expert_shares), since a small model has fewer of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.cluster.expert_load import COUNTS, ExpertLoad
from inferlab.engines.labs.moe.section import read_moe_section
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.trace.snapshot import read_snapshot


@dataclass(frozen=True)
class MeasuredCounts:
    """Where counts came from: the snapshot file, the model that ran, and its rows
    (counts[layer][expert], the MoE layers in the model's order)."""

    source: str
    model: str
    n_experts: int
    top_k: int
    counts: tuple[tuple[int, ...], ...]

    def load(self, seed: int = 0) -> ExpertLoad:
        return ExpertLoad(COUNTS, seed=seed, counts=self.counts)

    def to_dict(self) -> dict:
        return {"source": self.source, "model": self.model, "n_experts": self.n_experts,
                "top_k": self.top_k, "counts": [list(row) for row in self.counts]}


def read_expert_counts(path: str) -> MeasuredCounts:
    """The summed counts of the MoE lab run in the snapshot at `path`; ValueError says what
    is missing (no MoE lab section, no decode step) or which field is bad."""
    snapshot = read_snapshot(path)
    section = snapshot.labs.get("moe")
    if section is None:
        raise ValueError(f"{path}: no MoE lab run in this snapshot (`inferlab run moe "
                         "--snapshot F` writes one)")
    moe = read_moe_section(section)
    if moe.info is None or not moe.steps:
        raise ValueError(f"{path}: the MoE lab section holds no decode step")
    n_layers = len(moe.info.moe_layers)
    counts = tuple(tuple(sum(step.expert_counts[layer][e] for step in moe.steps)
                         for e in range(moe.info.n_experts)) for layer in range(n_layers))
    return MeasuredCounts(str(path), moe.info.model_name, moe.info.n_experts, moe.info.top_k,
                          counts)


def check_routes_alike(measured: MeasuredCounts, cfg: ModelConfig) -> None:
    """ValueError unless the preset `cfg` routes to as many experts, as many per token."""
    if not cfg.is_moe:
        raise ValueError(f"{cfg.id} has no experts: measured expert counts need a MoE preset")
    if (measured.n_experts, measured.top_k) != (cfg.n_experts, cfg.n_experts_active):
        raise ValueError(f"{measured.source}: {measured.model} routes each token to "
                         f"{measured.top_k} of {measured.n_experts} experts; {cfg.id} to "
                         f"{cfg.n_experts_active} of {cfg.n_experts}: the counts do not apply")
