"""`inferlab run cluster --layout ep`: the summary's moe_layers hold each MoE layer's
dispatch and combine, their bytes the closed form summed over the run's steps; the new
settings round-trip through the snapshot section and a bad one is named."""

from __future__ import annotations

import argparse
import json

import pytest

from inferlab.engines.cluster.all_to_all import combine_bytes, dispatch_bytes
from inferlab.engines.labs.cluster import run as cluster_run
from inferlab.engines.labs.cluster.section import read_cluster_section
from inferlab.engines.labs.cluster.settings import CLUSTER_DEFAULTS, check_cluster_settings
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.trace.recorder import TraceRecorder

QWEN = load_model_preset("qwen3-30b-a3b")


def run_args(*argv):
    p = argparse.ArgumentParser()
    cluster_run.add_arguments(p)
    return p.parse_args(["--requests", "30", "--rate", "20", "--model-config",
                         "qwen3-30b-a3b", *argv])


@pytest.fixture(scope="module")
def ep_run():
    return cluster_run.run(run_args("--layout", "ep", "--gpus", "8", "--ep", "4"),
                           TraceRecorder())


def test_moe_layers_are_the_closed_form_summed_over_the_steps(ep_run):
    section, summary = ep_run
    json.dumps(summary)
    assert summary["layout"]["kind"] == "ep" and summary["layout"]["ep"] == 4
    layers = summary["moe_layers"]
    assert [m["layer"] for m in layers] == list(range(48))
    state = read_cluster_section(section).state
    # every step of both instances: T tokens, T / 4 on each GPU
    steps = [sum(p.n_tokens for p in it.prefills) + len(it.decodes)
             for inst in state.instances for it in inst.iterations]
    k, h = QWEN.n_experts_active, QWEN.d_model
    want_d = sum(dispatch_bytes(t / 4, k, h, 4) for t in steps if t)
    want_c = sum(combine_bytes(t / 4, k, h, 4) for t in steps if t)
    for m in layers:
        assert m["dispatch_bytes"] == pytest.approx(want_d, rel=1e-9)
        assert m["combine_bytes"] == pytest.approx(want_c, rel=1e-9)
        assert m["dispatch_s"] > 0 and m["combine_s"] > m["dispatch_s"]  # bf16 > fp8
        assert m["imbalance"] == m["imbalance_eplb"] == pytest.approx(1.0)
    assert state.moe_layers[0].to_dict() == layers[0]


def test_new_settings_round_trip_and_bad_ones_are_named():
    settings = dict(CLUSTER_DEFAULTS, layout="ep", gpus=16, ep=8, tp=2, eplb_slots=1,
                    dual_batch_overlap=True, expert_load="zipf", zipf_skew=1.5,
                    model_config="qwen3-30b-a3b", dtype="fp8")
    checked = check_cluster_settings(settings)
    assert check_cluster_settings(json.loads(json.dumps(checked))) == checked
    for change, message in (({"ep": 3}, "settings.layout"),
                            ({"ep": 256, "gpus": 256}, "settings.ep: ep = 256 does not divide"),
                            ({"zipf_skew": -1.0}, "settings.zipf_skew"),
                            ({"expert_load": "measured"}, "settings.expert_load"),
                            ({"dtype": "int3"}, "settings.dtype"),
                            ({"eplb_slots": 1000}, "settings.eplb_slots")):
        with pytest.raises(ValueError, match=message):
            check_cluster_settings(settings | change)
    # a replicas layout ignores the expert-parallel fields
    assert check_cluster_settings(settings | {"layout": "replicas"})["ep"] == 8


def test_zipf_with_eplb_reports_imbalance_before_and_after():
    _, summary = cluster_run.run(run_args("--layout", "ep", "--gpus", "8", "--ep", "8",
                                          "--expert-load", "zipf", "--zipf-skew", "1.2",
                                          "--eplb-slots", "1", "--dual-batch-overlap"),
                                 TraceRecorder())
    layers = summary["moe_layers"]
    assert all(m["imbalance"] > 1.3 for m in layers)
    assert all(m["imbalance_eplb"] < m["imbalance"] for m in layers)
