"""The cluster's expert load from a MoE lab run: the tiny MoE's router counts, saved in a
snapshot, drive an expert-parallel Mixtral-8x7B (8 experts, top-2, as the tiny MoE routes).
With EP = 8 every GPU holds one expert, so each MoE layer's imbalance is the counts' own
max / mean, the measured rows repeating over Mixtral's 32 MoE layers."""

from __future__ import annotations

import argparse

import pytest

from inferlab.engines.labs.cluster import run as cluster_run
from inferlab.engines.labs.moe.run import add_arguments as moe_arguments
from inferlab.engines.labs.moe.run import run as moe_run
from inferlab.engines.trace.recorder import TraceRecorder
from inferlab.engines.trace.snapshot import make_snapshot, write_snapshot


def _args(add, *argv):
    p = argparse.ArgumentParser()
    add(p)
    return p.parse_args(list(argv))


@pytest.fixture(scope="module")
def moe_snapshot(tmp_path_factory):
    """(path, the run's summary) of a tiny-moe run at batch 8, two steps, saved."""
    section, summary = moe_run(_args(moe_arguments, "--batch", "8", "--prompts", "8",
                                     "--steps", "2", "--sweep", "none", "--no-roof"),
                               TraceRecorder())
    path = tmp_path_factory.mktemp("moe") / "moe.json"
    write_snapshot(path, make_snapshot("test", {}, [], {"moe": section}))
    return path, summary


def _cluster(*argv):
    return cluster_run.run(_args(cluster_run.add_arguments, "--requests", "20", "--rate",
                                 "20", *argv), TraceRecorder())


def test_measured_counts_set_each_layers_imbalance(moe_snapshot):
    path, moe = moe_snapshot
    _section, summary = _cluster("--layout", "ep", "--gpus", "8", "--ep", "8",
                                 "--model-config", "mixtral-8x7b", "--expert-counts", str(path))
    rows = [moe["expert_counts"][layer] for layer in ("0", "1")]
    assert summary["expert_counts"]["counts"] == rows
    assert summary["expert_counts"]["n_experts"] == 8
    for row in rows:
        assert sum(row) == 2 * 8 * 2  # two steps of 8 tokens, top-2
    layers = summary["moe_layers"]
    assert len(layers) == 32
    for m in layers:
        row = rows[m["layer"] % 2]
        assert m["imbalance"] == pytest.approx(max(row) / (sum(row) / 8))


def test_counts_of_another_routing_are_refused(moe_snapshot):
    path, _ = moe_snapshot
    with pytest.raises(ValueError, match="routes each token to 2 of 8 experts; qwen3-30b-a3b "
                                         "to 8 of 128"):
        _cluster("--layout", "ep", "--gpus", "8", "--ep", "8", "--model-config",
                 "qwen3-30b-a3b", "--expert-counts", str(path))


def test_a_snapshot_without_a_moe_run_is_refused(tmp_path):
    path = tmp_path / "empty.json"
    write_snapshot(path, make_snapshot("test", {}, [], {}))
    with pytest.raises(ValueError, match="no MoE lab run in this snapshot"):
        _cluster("--layout", "ep", "--gpus", "8", "--ep", "8", "--model-config",
                 "mixtral-8x7b", "--expert-counts", str(path))


def test_counts_without_measured_counts_are_named():
    with pytest.raises(ValueError, match="--expert-counts"):
        _cluster("--layout", "ep", "--gpus", "8", "--ep", "8", "--model-config",
                 "mixtral-8x7b", "--expert-load", "counts")
