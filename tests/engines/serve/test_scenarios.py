"""The workload builders the labs share (engines/serve/scenarios.py), against the workload and
scenario modules called by hand."""

from __future__ import annotations

import pytest

from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.prefix_workloads import SCENARIOS, make_scenario
from inferlab.engines.serve.scenarios import (
    WORKLOADS,
    lognormal_workload,
    settings_slo,
    workload_items,
)
from inferlab.engines.serve.workload import LengthDist, Workload, generate

SETTINGS = {"scenario": "lognormal", "seed": 3, "requests": 12, "rate_per_s": 5.0,
            "prompt_mean": 4.0, "prompt_sigma": 0.3, "output_mean": 3.0, "output_sigma": 0.2,
            "slo_ttft_s": 0.5, "slo_tpot_s": 0.02}


def test_workloads_are_the_stream_then_every_scenario():
    assert WORKLOADS == ("lognormal", *SCENARIOS)
    assert len(set(WORKLOADS)) == len(WORKLOADS)


def test_lognormal_workload_is_the_settings_spec():
    assert lognormal_workload(SETTINGS) == Workload(
        12, rate_per_s=5.0, prompt_len=LengthDist.lognormal(4.0, 0.3),
        output_len=LengthDist.lognormal(3.0, 0.2), seed=3)


def test_the_stream_items_are_the_seeded_stream():
    items = workload_items(SETTINGS, vocab_size=1000, scale=4)  # the scale is a scenario's
    assert items == generate(Workload(12, rate_per_s=5.0,
                                      prompt_len=LengthDist.lognormal(4.0, 0.3),
                                      output_len=LengthDist.lognormal(3.0, 0.2), seed=3))
    assert len(items) == 12


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_scenario_sizes_itself_at_the_given_scale(scenario):
    settings = dict(SETTINGS, scenario=scenario)
    items = workload_items(settings, vocab_size=500, scale=2)
    assert items == make_scenario(scenario, 3, scale=2, vocab_size=500)
    assert all(max(w.prompt_token_ids) < 500 for w in items)


def test_settings_slo():
    assert settings_slo(SETTINGS) == SLO(ttft_s=0.5, tpot_s=0.02)
