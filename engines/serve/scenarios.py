"""The workloads a lab names in its settings: the seeded stream or a prefix-sharing scenario.

The batching, cluster and endpoint labs all take the same workload settings (`scenario`,
`seed`, `requests`, `rate_per_s`, `prompt_mean` / `prompt_sigma`, `output_mean` /
`output_sigma`) and SLO settings (`slo_ttft_s`, `slo_tpot_s`); the builders here turn such a
settings dict into WorkloadRequests, a Workload spec and an SLO.
"""

from __future__ import annotations

from inferlab.engines.serve import workload
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.prefix_workloads import SCENARIOS, make_scenario

WORKLOADS = ("lognormal", *SCENARIOS)
"""The seeded stream (Poisson arrivals, lognormal lengths, made-up distinct prompts) or one of
the content scenarios, whose prompts share what their users' prompts share (multi-turn chat,
few-shot, document QA, parallel branches, agent loops)."""
SIMULATED_SCENARIO_SCALE = 4
"""Scenario token sizes × this on the simulated clock (8k-context models; × 1 fits 2k)."""


def workload_items(settings: dict, vocab_size: int, scale: float = 1.0) -> list:
    """The WorkloadRequests of `settings`: its scenario's (token sizes × `scale`, ids below
    `vocab_size`; `requests` does not apply: a scenario sizes itself), or the seeded stream."""
    if settings["scenario"] == "lognormal":
        return workload.generate(lognormal_workload(settings))
    return make_scenario(settings["scenario"], int(settings["seed"]), scale=scale,
                         vocab_size=vocab_size)


def lognormal_workload(settings: dict) -> workload.Workload:
    """The workload spec of `settings` (seeded Poisson arrivals, lognormal lengths)."""
    return workload.Workload(
        int(settings["requests"]), rate_per_s=float(settings["rate_per_s"]),
        prompt_len=workload.LengthDist.lognormal(settings["prompt_mean"],
                                                 settings["prompt_sigma"]),
        output_len=workload.LengthDist.lognormal(settings["output_mean"],
                                                 settings["output_sigma"]),
        seed=int(settings["seed"]))


def settings_slo(settings: dict) -> SLO:
    """The SLO goodput is judged by: `slo_ttft_s` and `slo_tpot_s` of `settings`."""
    return SLO(ttft_s=float(settings["slo_ttft_s"]), tpot_s=float(settings["slo_tpot_s"]))
