"""The section round-trips the run's records exactly, and a bad field is named."""

from __future__ import annotations

import copy

import pytest

from inferlab.engines.labs.moe.compare_plots import moe_plots
from inferlab.engines.labs.moe.section import moe_section, read_moe_section
from inferlab.engines.labs.moe.settings import MOE_DEFAULTS

from .conftest import ROOF


def test_round_trip(run, section):
    settings, model, info, steps, sweep = run
    snap = read_moe_section(section)
    assert snap.info == info and snap.steps == tuple(steps) and snap.sweep == tuple(sweep)
    assert snap.model_config == model.config and snap.roof == ROOF
    assert snap.settings == settings


def test_metrics_are_the_runs(run, section):
    *_, info, steps, _sweep = run
    m = section["metrics"]
    assert m["distinct_experts_per_layer"]["formula"] == steps[0].distinct_experts_formula
    assert set(m["distinct_experts_per_layer"]["measured"]) == {"0", "1"}
    assert set(m["imbalance_max_over_mean"]) == {"0", "1"}
    for counts in m["expert_counts"].values():
        assert sum(counts) == len(steps) * steps[0].batch * info.top_k
    assert m["grouped_speedup"] == pytest.approx(m["per_token_s"] / m["grouped_s"])


def test_a_section_without_a_run():
    snap = read_moe_section(moe_section(dict(MOE_DEFAULTS), None, None, (), ()))
    assert (snap.info, snap.steps, snap.sweep, snap.roof) == (None, (), (), None)


def _bad(section, edit):
    sec = copy.deepcopy(section)
    edit(sec)
    return sec


@pytest.mark.parametrize("edit, field", [
    (lambda s: s["settings"].update(batch=0), "labs.moe.settings.batch"),
    (lambda s: s["state"]["steps"][1].update(batch=-1), "labs.moe.state.steps[1].batch"),
    (lambda s: s["state"]["steps"][0].update(grouped_s="fast"),
     "labs.moe.state.steps[0].grouped_s"),
    (lambda s: s["state"]["steps"][0]["expert_counts"][1].append(3),
     "labs.moe.state.steps[0].expert_counts[1]"),
    (lambda s: s["state"]["steps"][0].update(distinct_experts=[1]),
     "labs.moe.state.steps[0]: distinct_experts"),
    (lambda s: s["state"]["steps"][2].pop("per_token_s"), "labs.moe.state.steps[2]"),
    (lambda s: s["state"]["run"].update(top_k=99), "labs.moe.state.run"),
    (lambda s: s["state"]["run"].update(expert_bytes=[1]), "labs.moe.state.run: expert_bytes"),
    (lambda s: s["state"]["sweep"][0].update(step_s=float("nan")),
     "labs.moe.state.sweep[0].step_s"),
    (lambda s: s["state"]["roof"].update(bw_bytes_per_s=0), "labs.moe.state.roof.bw_bytes_per_s"),
    (lambda s: s["state"]["model_config"].update(n_layers="two"), "labs.moe.state.model_config"),
    (lambda s: s["state"].pop("sweep"), "labs.moe.state: missing field 'sweep'"),
])
def test_a_bad_field_is_named(section, edit, field):
    with pytest.raises(ValueError) as err:
        read_moe_section(_bad(section, edit))
    assert str(err.value).startswith(field), str(err.value)


def test_compare_plots_are_the_sweeps(run, section):
    *_, sweep = run
    distinct, read, _times = moe_plots(read_moe_section(section))
    assert distinct.curves[0].x.tolist() == [1.0, 8.0]
    assert distinct.curves[0].y.tolist() == [p.distinct_experts for p in sweep]
    assert read.curves[1].y.tolist() == [p.weight_bytes_per_step_formula / 2**20 for p in sweep]
