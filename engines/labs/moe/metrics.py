"""A MoE run's figures over its decode steps (the section's metrics, what `inferlab run moe
--json` prints): per MoE layer (keyed by the model's layer index) the distinct experts
touched, max / mean load and tokens per expert, beside the closed form's distinct count; the
weights read per step, measured and by the formula; the grouped and per-token MoE times
(medians) and the decode step's; and the B sweep."""

from __future__ import annotations

import statistics
from dataclasses import asdict


def moe_metrics(info, steps, sweep) -> dict:
    """`info`: MoERunInfo; `steps`: its MoEStepRecords (at least one for figures); `sweep`:
    BatchPoints."""
    if not steps:
        return {"steps": 0, "sweep": [asdict(p) for p in sweep]}
    layers = [str(i) for i in info.moe_layers]

    def per_layer(name: str) -> dict[str, float]:
        return {layer: statistics.fmean(getattr(r, name)[j] for r in steps)
                for j, layer in enumerate(layers)}

    grouped = statistics.median(r.grouped_s for r in steps)
    per_token = statistics.median(r.per_token_s for r in steps)
    step_s = statistics.median(r.step_s for r in steps)
    batch = steps[0].batch
    return {
        "steps": len(steps), "batch": batch, "n_experts": info.n_experts, "top_k": info.top_k,
        "distinct_experts_per_layer": {"measured": per_layer("distinct_experts"),
                                       "formula": steps[0].distinct_experts_formula},
        "imbalance_max_over_mean": per_layer("imbalance_max_over_mean"),
        "expert_counts": {layer: [sum(r.expert_counts[j][e] for r in steps)
                                  for e in range(info.n_experts)]
                          for j, layer in enumerate(layers)},
        "topk_weight_mean": {layer: [statistics.fmean(r.topk_weight_mean[j][rank]
                                                      for r in steps)
                                     for rank in range(info.top_k)]
                             for j, layer in enumerate(layers)},
        "weight_bytes_per_step": {
            "measured": statistics.fmean(r.weight_bytes_per_step for r in steps),
            "formula": steps[0].weight_bytes_per_step_formula,
            "total": info.weight_bytes_total},
        "grouped_s": grouped, "per_token_s": per_token,
        "grouped_speedup": per_token / grouped if grouped > 0 else 0.0,
        "grouped_max_abs_diff": max(r.grouped_max_abs_diff for r in steps),
        "step_s": step_s, "tokens_per_s": batch / step_s if step_s > 0 else 0.0,
        "params_total": info.params_total, "params_active": info.params_active,
        "sweep": [asdict(p) for p in sweep],
    }
