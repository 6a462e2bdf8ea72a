"""The cluster lab's views draw a run's records: one lane per instance and the link, merged
spans, utilisation bars; the search heat map marks its best cell."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.engines.cluster.cluster import ClusterConfig, run_cluster
from inferlab.engines.cluster.expert_load import ExpertLoad
from inferlab.engines.cluster.layout import Layout
from inferlab.engines.cluster.links import load_link_preset
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.labs.cluster.records import cluster_state
from inferlab.engines.labs.cluster.settings import CLUSTER_SETTINGS
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import requests_from_workload
from inferlab.engines.serve.workload import LengthDist, Workload, generate
from inferlab.views.cluster_experts import ClusterExperts
from inferlab.views.cluster_search import (
    UNFIT_GREY,
    ClusterSearchView,
    column_ticks,
    search_grid,
)
from inferlab.views.cluster_timeline import ClusterTimeline, merged_spans
from inferlab.views.cluster_view import ClusterView, metric_rows


def test_merged_spans_join_back_to_back_records_of_one_kind():
    starts = [0.0, 1.0, 2.0, 3.5, 4.5, 5.5]
    ends = [1.0, 2.0, 3.0, 4.5, 5.5, 6.0]
    kinds = [True, True, False, False, False, True]
    s, e, k = merged_spans(starts, ends, kinds)
    # [0,2) prefill; [2,3) decode; a gap; [3.5,5.5) decode; [5.5,6) prefill
    assert s.tolist() == [0.0, 2.0, 3.5, 5.5]
    assert e.tolist() == [2.0, 3.0, 5.5, 6.0]
    assert k.tolist() == [True, False, False, True]


@pytest.fixture(scope="module")
def pd_state():
    cfg = load_model_preset("llama-3-8b")
    items = generate(Workload(30, rate_per_s=20, prompt_len=LengthDist.lognormal(6, 0.5),
                              output_len=LengthDist.lognormal(4, 0.5)))
    config = ClusterConfig(cfg, load_hardware_preset("h100-sxm"), load_link_preset("nvlink4"),
                           Layout("pd", prefill=1, decode=2))
    return cluster_state(run_cluster(config, requests_from_workload(items, cfg.vocab_size)))


def test_timeline_draws_a_lane_per_instance_and_the_link(qtbot, pd_state):
    view = ClusterTimeline()
    qtbot.addWidget(view)
    view.draw(pd_state)
    ticks = [label for _, label in view.lanes.getAxis("left")._tickLevels[0]]
    assert ticks == ["prefill 0 (1 GPU)", "decode 1 (1 GPU)", "decode 2 (1 GPU)",
                     "link (KV transfers)"]
    x0 = np.asarray(view.transfer_bars.opts["x0"])
    assert len(x0) == len(pd_state.transfers)
    assert (np.asarray(view.transfer_bars.opts["y"]) == 3).all()
    # merged spans never outnumber the iterations, and cover each instance's busy time
    n_iterations = sum(len(i.iterations) for i in pd_state.instances)
    assert 0 < view.n_bars - len(pd_state.transfers) <= n_iterations
    widths = [np.asarray(b.opts["x1"]) - np.asarray(b.opts["x0"])
              for b in (view.prefill_bars, view.decode_bars)]
    busy = sum(i.busy_s for i in pd_state.instances)
    assert sum(w.sum() for w in widths) == pytest.approx(busy, rel=1e-6)
    util = np.asarray(view.util_bars.opts["x1"])
    assert util == pytest.approx([100 * i.utilization(pd_state.makespan_s)
                                  for i in pd_state.instances])
    view.draw(None)
    assert view.n_bars == 0


def test_search_heat_map_marks_the_best_cell(qtbot):
    summary = {"kind": "replicas", "budget_gpus": 4, "tp_rows": [1, 2], "columns": ["1", "2"],
               "cells": [{"row": 0, "column": 0, "label": "1 × t1", "goodput_per_gpu": 3.0},
                         {"row": 0, "column": 1, "label": "2 × t1", "goodput_per_gpu": 5.0},
                         {"row": 1, "column": 0, "label": "1 × t2", "goodput_per_gpu": 0.0}],
               "best": "2 × t1"}
    grid = search_grid(summary)
    assert grid[0].tolist() == [3.0, 5.0] and grid[1, 0] == 0.0 and np.isnan(grid[1, 1])
    view = ClusterSearchView()
    qtbot.addWidget(view)
    view.show_summary(summary)
    assert view.best.isVisible() and view.best.rect().x() == 1 and view.best.rect().y() == 0
    texts = [t.toPlainText() for t in view.texts]
    assert "over budget" in texts and any("misses the SLOs" in t for t in texts)
    assert view.unfit.image[1, 1].tolist() == list(UNFIT_GREY)  # over budget: grey
    assert view.unfit.image[0, 0, 3] == 0  # a run cell shows its colour
    view.show_summary(None)
    assert not view.best.isVisible() and not view.texts


def test_a_dense_ep_search_names_each_replica_group_and_writes_no_cell_text(qtbot):
    columns = [f"{r} × group{f', +{s} EPLB' if s else ''}{', DBO' if d else ''}"
               for r in (1, 2) for s in (0, 1, 2) for d in (False, True)]
    cells = [{"row": 0, "column": j, "label": c, "goodput_per_gpu": 1.0 + j}
             for j, c in enumerate(columns)]
    summary = {"kind": "ep", "budget_gpus": 16, "tp_rows": [1], "row_labels": ["EP8 t1"],
               "columns": columns, "cells": cells, "best": columns[-1]}
    view = ClusterSearchView()
    qtbot.addWidget(view)
    view.show_summary(summary)
    assert not view.texts  # 12 columns: too narrow to write in
    named, bare = column_ticks(columns)
    assert [label for _, label in named] == ["1 × group", "2 × group"]
    assert [x for x, _ in named] == [0.5, 6.5] and len(bare) == 12
    assert "EPLB slots per GPU" in view.caption.text()
    assert column_ticks(columns[:4]) == [[(j + 0.5, c) for j, c in enumerate(columns[:4])], []]


def test_view_settings_round_trip_and_the_figures(qtbot):
    from inferlab.engines.labs.cluster.settings import CLUSTER_DEFAULTS

    view = ClusterView(CLUSTER_SETTINGS)
    qtbot.addWidget(view)
    wanted = dict(CLUSTER_DEFAULTS, layout="replicas", gpus=4, tp=2, router="prefix",
                  link="pcie5-x16", rate_per_s=12.5, overlap_transfer=False)
    view.set_settings(wanted)
    got = view.settings()
    assert {k: wanted[k] for k in got} == got
    assert not view.prefill.isEnabled() and view.tp.isEnabled()
    rows = dict((r[0], r[1]) for r in metric_rows(
        {"layout": "2 × t2", "gpus": 4, "goodput_per_gpu": 2.5, "slo_attainment": 0.95,
         "ttft_s": {"p50": 0.01, "p90": 0.02}, "tpot_s": {"p50": 0.005, "p90": None},
         "utilization": [0.5, 0.75]}, wanted))
    assert rows["Goodput per GPU"] == "2.5 requests/s"
    assert rows["TPOT p50 / p90"] == "5.0 ms / —"
    assert rows["Utilisation min / max"] == "50 % / 75 %"
    view.show_search({"kind": "pd", "budget_gpus": 4, "tp_rows": [1], "columns": ["1P:3D"],
                      "cells": [{"row": 0, "column": 0, "label": "1P:3D × t1",
                                 "goodput_per_gpu": 1.0}], "best": "1P:3D × t1"})
    assert view.search_kind.currentData() == "pd"  # a replayed search names its kind


def test_each_instance_on_the_batching_labs_gantt(qtbot, pd_state):
    from inferlab.engines.labs.cluster.settings import CLUSTER_DEFAULTS

    view = ClusterView(CLUSTER_SETTINGS)
    qtbot.addWidget(view)
    view.draw(pd_state, {}, dict(CLUSTER_DEFAULTS))
    assert view.instance_choice.count() == 3
    decode = pd_state.instances[2]
    view.instance_choice.setCurrentIndex(2)
    gantt = view.requests_gantt
    assert set(gantt.segments.request_ids) == {r.request_id for r in decode.requests}
    assert gantt.iterations == decode.iterations
    view.draw(None, {}, dict(CLUSTER_DEFAULTS))
    assert view.instance_choice.count() == 0


def test_expert_parallel_tab_draws_each_moe_layers_all_to_alls_and_imbalance(qtbot):
    cfg = load_model_preset("qwen3-30b-a3b")
    items = generate(Workload(20, rate_per_s=20, prompt_len=LengthDist.lognormal(5, 0.3),
                              output_len=LengthDist.lognormal(3, 0.3)))
    config = ClusterConfig(cfg, load_hardware_preset("h100-sxm"), load_link_preset("nvlink4"),
                           Layout("ep", ep=4, eplb_slots=1),
                           expert_load=ExpertLoad("zipf", 1.2, seed=3))
    state = cluster_state(run_cluster(config, requests_from_workload(items, cfg.vocab_size)))
    view = ClusterExperts()
    qtbot.addWidget(view)
    view.draw(state.moe_layers)
    assert len(state.moe_layers) == cfg.n_moe_layers == 48
    heights = view.dispatch.opts["height"] + view.combine.opts["height"]
    assert heights == pytest.approx([(m.dispatch_s + m.combine_s) * 1e3
                                     for m in state.moe_layers])
    assert np.array_equal(view.combine.opts["y0"], view.dispatch.opts["height"])  # stacked
    before, after = view.before.getData()[1], view.after.getData()[1]
    assert (after <= before + 1e-12).all() and before.max() > 1.0  # Zipf: EPLB helps
    assert "48 MoE layers" in view.note.text()
    view.draw(())
    assert "No expert-parallel layer" in view.note.text()
