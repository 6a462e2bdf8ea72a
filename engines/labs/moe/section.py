"""The MoE lab's snapshot section (`labs.moe`): `moe_section` writes the settings, the model's
description, the run, its decode steps, the B sweep and the measured roof, with the run's
figures as metrics (`metrics.moe_metrics`); `read_moe_section` reads it back strictly into a
`MoESnapshot` (ValueError naming the field)."""

from __future__ import annotations

from dataclasses import asdict

from inferlab.engines.fields import named, read_list, read_object
from inferlab.engines.labs.moe.metrics import moe_metrics
from inferlab.engines.labs.moe.records import (
    MoERunInfo,
    MoESnapshot,
    read_point,
    read_roof,
    read_steps,
)
from inferlab.engines.labs.moe.settings import MAX_BATCH, check_moe_settings
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.trace.snapshot import lab_section, section_field

WHERE = "labs.moe"


def moe_section(settings: dict, model_config: ModelConfig | None, info: MoERunInfo | None,
                steps, sweep, roof=None) -> dict:
    """`info` None: no run yet (settings only). `roof`: a MeasuredRoof, or None."""
    if info is None:
        return lab_section(settings, {}, {"steps": 0})
    state = {"model_config": model_config.to_dict(), "run": info.to_dict(),
             "steps": [asdict(r) for r in steps], "sweep": [asdict(p) for p in sweep],
             "roof": None if roof is None else asdict(roof)}
    return lab_section(settings, state, moe_metrics(info, steps, sweep))


def read_moe_section(sec: dict) -> MoESnapshot:
    """The section as a `MoESnapshot`; ValueError names a bad field."""
    read_object(sec, WHERE)
    settings = check_moe_settings(section_field(sec, "settings", WHERE), f"{WHERE}.settings")
    state = read_object(section_field(sec, "state", WHERE), f"{WHERE}.state")
    if not state:
        return MoESnapshot(settings, None, None, (), (), None)
    where = f"{WHERE}.state"
    with named(f"{where}.model_config"):
        cfg = ModelConfig.from_dict(section_field(state, "model_config", where))
    info = MoERunInfo.from_dict(section_field(state, "run", where), f"{where}.run")
    steps = tuple(read_steps(section_field(state, "steps", where), where=f"{where}.steps"))
    sweep = tuple(read_list(section_field(state, "sweep", where), read_point,
                            f"{where}.sweep", MAX_BATCH))
    roof = read_roof(section_field(state, "roof", where), f"{where}.roof")
    for i, r in enumerate(steps):
        at = f"{where}.steps[{i}]"
        if len(r.expert_counts) != len(info.moe_layers):
            raise ValueError(f"{at}.expert_counts: {len(r.expert_counts)} layers, the run has "
                             f"{len(info.moe_layers)} MoE layers")
        for j, row in enumerate(r.expert_counts):
            if len(row) != info.n_experts or sum(row) != r.batch * info.top_k:
                raise ValueError(f"{at}.expert_counts[{j}]: {len(row)} experts holding "
                                 f"{sum(row)} tokens, expected {info.n_experts} holding "
                                 f"batch × k = {r.batch * info.top_k}")
        for j, row in enumerate(r.topk_weight_mean):
            if len(row) != info.top_k:
                raise ValueError(f"{at}.topk_weight_mean[{j}]: {len(row)} ranks, expected "
                                 f"k = {info.top_k}")
    return MoESnapshot(settings, cfg, info, steps, sweep, roof)
