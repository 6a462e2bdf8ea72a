"""Each lab's side of a comparison's plots (engines/labs/<id>/compare_plots.py): the series
are the snapshot section's own records, checked against the section's JSON (and, where the
lab wrote them, its own metrics); a section compared with itself overlays identical A and B;
a section without a run draws nothing."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from inferlab.app.labs.registry import lab_spec, resolve
from inferlab.engines.labs.attention.section import TIMING_SERIES
from inferlab.engines.serve.metrics import percentiles
from inferlab.engines.trace.overlay import overlay
from tests.app.lab_sections import BUILDERS

PLOTTED = ("hardware", "roofline", "memory", "mcu", "kv", "batching", "quant", "endpoint",
           "speculative", "cluster", "attention")


@functools.cache
def section(lab: str) -> dict:
    return BUILDERS[lab]()


def plots_of(lab: str, sec: dict | None = None) -> dict:
    """Title -> Plot of `lab`'s section (its real one by default), through the registry."""
    spec = lab_spec(lab)
    read = resolve(spec.read_section)(section(lab) if sec is None else sec)
    return {p.title: p for p in resolve(spec.compare_plots)(read)}


def curve(plot, name: str):
    return next(c for c in plot.curves if c.name == name)


def test_every_plotted_lab_names_its_plots_in_the_registry():
    assert [lab for lab in PLOTTED if lab_spec(lab).compare_plots is None] == []


def test_batching_cdfs_are_the_runs_latencies_and_the_strips_its_iterations():
    sec = section("batching")
    plots = plots_of("batching")
    metrics, iterations = sec["metrics"], sec["state"]["iterations"]
    for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s")):
        c = next(p for t, p in plots.items() if t.startswith(f"{name} CDF")).curves[0]
        n = c.x.size
        assert n == metrics["completed"] or name == "TPOT"
        assert np.all(np.diff(c.x) >= 0) and c.y.tolist() == [(i + 1) / n for i in range(n)]
        # the run's own p50 / p90 / p99 (seconds) are those of the plotted values (ms)
        want = [metrics[key][p] for p in ("p50", "p90", "p99")]
        assert np.allclose(percentiles(c.x / 1e3, (50, 90, 99)), want, rtol=1e-12)
    t0 = min(min(r["arrival_s"] for r in sec["state"]["requests"]), iterations[0]["start_s"])
    size = curve(plots["Batch size per iteration"], "batch size")
    assert size.x.tolist() == [it["end_s"] - t0 for it in iterations]
    assert size.y.tolist() == [len(it["decodes"]) + len(it["prefills"]) for it in iterations]
    kv = curve(plots["KV pool use per iteration"], "KV use")
    assert np.allclose(kv.y, [100 * it["kv_used_blocks"] / it["kv_total_blocks"]
                              for it in iterations], rtol=1e-12)


def test_endpoint_cdfs_are_the_clients_latencies_of_the_requests_that_succeeded():
    sec = section("endpoint")  # the fixture: 3 requests streamed, 1 answered HTTP 500
    metrics, results = sec["metrics"], sec["state"]["run"]["requests"]
    ok = [r for r in results if r["error"] is None]
    assert len(ok) == 3 == metrics["completed"] and len(results) == 4
    plots = plots_of("endpoint")
    ttft = next(p for t, p in plots.items() if t.startswith("TTFT CDF")).curves[0]
    assert ttft.x.tolist() == sorted(1e3 * (r["chunk_times_s"][0] - r["send_s"]) for r in ok)
    for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s")):
        c = next(p for t, p in plots.items() if t.startswith(f"{name} CDF")).curves[0]
        want = [metrics[key][p] for p in ("p50", "p99")]
        assert np.allclose(percentiles(c.x / 1e3, (50, 99)), want, rtol=1e-12), name


def test_roofline_roof_and_points_are_the_measured_ones():
    sec = section("roofline")
    (plot,) = plots_of("roofline").values()
    assert plot.log_x and plot.log_y
    roof = curve(plot, "cpu roof (fp32)")  # the fixture: P = 1e11 FLOP/s, W = 2e10 B/s
    assert np.allclose(roof.y, np.minimum(1e11, roof.x * 2e10), rtol=1e-12)
    assert roof.y.max() == 1e11 and 5.0 in roof.x  # the knee P / W, drawn exactly
    points = curve(plot, "measured operations")
    raw = sec["state"]["measured_points"]
    assert points.style == "points"
    assert points.x.tolist() == [p["intensity"] for p in raw]
    assert points.y.tolist() == [p["achieved_flops_per_s"] for p in raw]


def test_quant_sqnr_per_linear_and_perplexity_per_scheme_are_the_runs():
    runs = section("quant")["state"]["runs"]
    plots = plots_of("quant")
    (scheme,) = [r for r in runs if r["sqnr_db"]]
    sqnr = plots[f"SQNR per linear: {scheme['scheme']}"]
    assert sqnr.x_ticks == tuple(scheme["sqnr_db"])
    assert sqnr.curves[0].x.tolist() == list(range(len(scheme["sqnr_db"])))
    assert sqnr.curves[0].y.tolist() == list(scheme["sqnr_db"].values())
    ppl = next(p for t, p in plots.items() if t.startswith("Perplexity")).curves[0]
    assert ppl.x.tolist() == [r["weight_bytes"] / 1e6 for r in runs]
    assert ppl.y.tolist() == [r["perplexity"] for r in runs]


def test_mcu_arena_use_is_each_layouts_high_water():
    layouts = section("mcu")["state"]["layouts"]
    arena = plots_of("mcu")["Arena in use by step"]
    assert [(c.name, c.steps, c.dashed) for c in arena.curves] == \
        [(layouts[0]["planner"], True, False), (layouts[1]["planner"], True, True)]
    for c, layout in zip(arena.curves, layouts, strict=True):
        assert list(zip(c.x.tolist(), c.y.tolist(), strict=True)) == \
            [tuple(map(float, step)) for step in layout["high_water"]]


def test_kv_pool_and_reservations_are_each_steps_stats():
    steps = section("kv")["state"]["steps"]
    plots = plots_of("kv")
    pool, reserved = plots["Paged KV pool by step"], plots["KV slots reserved by step"]
    assert curve(pool, "blocks in use").y.tolist() == [s["paged"]["blocks_used"] for s in steps]
    assert curve(pool, "cached, free").y.tolist() == \
        [s["paged"]["blocks_cached_free"] for s in steps]
    assert curve(reserved, "contiguous").y.tolist() == \
        [s["contiguous"]["slots_reserved"] for s in steps]
    assert curve(reserved, "paged").x.tolist() == [s["step"] for s in steps]


def test_hardware_telemetry_starts_at_zero_and_roofs_are_per_dtype():
    plots = plots_of("hardware")  # the fixture: 4 samples 0.5 s apart, cores at 5 % and 10 %
    cpu = plots["CPU utilisation (mean of the logical cores)"].curves[0]
    assert cpu.x.tolist() == [0.0, 0.5, 1.0, 1.5] and cpu.y.tolist() == [7.5] * 4
    gpu = plots["GPU utilisation"].curves[0]
    assert gpu.name == "cuda:0" and np.isnan(gpu.y[2]) and gpu.y[3] == 90.0
    roofs = plots["Measured roofs"].curves
    assert [(c.name, c.dashed, c.y.max()) for c in roofs] == \
        [("cpu fp32", False, 1e11), ("cpu bf16", True, 5e10)]


def test_memory_at_the_settings_context_is_the_labs_own_plan():
    sec = section("memory")
    (plot,) = plots_of("memory").values()
    total, budget = plot.curves
    at = np.flatnonzero(total.x == sec["settings"]["context"])
    assert at.size == 1 and total.y[at[0]] == sec["metrics"]["total_bytes"] / 2**30
    assert budget.dashed and np.unique(budget.y).size == 1
    assert np.all(np.diff(total.y) >= 0)  # more context, more KV


def test_speculative_plots_are_the_runs_rates_and_emitted_tokens():
    sec = section("speculative")
    plots = plots_of("speculative")
    rates = sec["metrics"]["acceptance_rate_by_position"]
    acc = curve(plots["Acceptance by draft position"], "acceptance")
    assert acc.x.tolist() == list(range(1, len(rates) + 1))
    assert np.allclose(acc.y, [100 * r for r in rates], rtol=1e-12)
    steps = sec["state"]["steps"]
    tokens = curve(plots["Tokens emitted by target forward"], "tokens")
    assert tokens.x.tolist() == list(range(1, len(steps) + 1))
    assert tokens.y[-1] == sec["metrics"]["tokens"]
    assert np.diff(tokens.y, prepend=0).tolist() == [len(s["token_ids"]) for s in steps]


def test_cluster_cdfs_utilisation_and_kv_are_the_runs_own():
    sec = section("cluster")  # the fixture: 2P:2D, 12 requests
    metrics, state = sec["metrics"], sec["state"]
    plots = plots_of("cluster")
    for name, key in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s")):
        c = next(p for t, p in plots.items() if t.startswith(f"{name} CDF")).curves[0]
        assert c.x.size == metrics["completed"] == 12
        want = [metrics[key][p] for p in ("p50", "p90", "p99")]
        assert np.allclose(percentiles(c.x / 1e3, (50, 90, 99)), want, rtol=1e-12), name
    ttft = next(p for t, p in plots.items() if t.startswith("TTFT CDF")).curves[0]
    assert ttft.x.tolist() == sorted(1e3 * (r["token_times_s"][0] - r["arrival_s"])
                                     for r in state["requests"])
    util = plots["Utilisation per instance"]
    assert util.x_ticks == ("prefill 0", "prefill 1", "decode 2", "decode 3")
    assert util.curves[0].style == "points"
    assert np.allclose(util.curves[0].y, [100 * u for u in metrics["utilization"]],
                       rtol=1e-12)
    t0 = min(r["arrival_s"] for r in state["requests"])
    for inst, name in zip(state["instances"], util.x_ticks, strict=True):
        kv = curve(plots["KV pool use per instance"], name)
        its = inst["iterations"]
        assert kv.dashed == (inst["role"] == "prefill")
        assert kv.steps and kv.x.tolist() == [it["end_s"] - t0 for it in its]
        assert np.allclose(kv.y, [100 * it["kv_used_blocks"] / it["kv_total_blocks"]
                                  for it in its], rtol=1e-12)


def test_attention_bytes_are_the_steps_counts_and_the_closed_forms():
    sec = section("attention")
    run, steps, timings = sec["state"]["run"], sec["state"]["steps"], sec["state"]["timings"]
    plots = plots_of("attention")
    moved = plots["Main-memory bytes by step"]
    read = curve(moved, f"read ({run['execution']})")
    written = curve(moved, f"written ({run['execution']})")
    assert read.x.tolist() == [s["step"] + 1 for s in steps] and moved.log_y
    assert read.y.tolist() == [s["bytes_read"] for s in steps]
    assert written.dashed and written.y.tolist() == [s["bytes_written"] for s in steps]
    assert read.y[-1] == sec["metrics"]["bytes_read"] == sec["metrics"]["closed_form_bytes_read"]
    for what, field in (("read", "bytes_read"), ("written", "bytes_written")):
        plot = plots[f"Bytes {what} per execution (closed form)"]
        assert plot.x_ticks == tuple(run["closed_forms"])
        assert plot.curves[0].y.tolist() == [f[field] for f in run["closed_forms"].values()]
    sdpa = curve(plots["Time per call against N: torch SDPA"], "torch SDPA")
    assert sdpa.x.tolist() == [r["n"] for r in timings if r.get("sdpa_s")]
    assert np.allclose(sdpa.y, [1e3 * r["sdpa_s"] for r in timings if r.get("sdpa_s")])
    timed = {t.split(": ", 1)[1] for t in plots if t.startswith("Time per call")}
    assert timed == {name for key, name in TIMING_SERIES if any(r.get(key) for r in timings)}


@pytest.mark.parametrize("lab", PLOTTED)
def test_a_section_compared_with_itself_overlays_identical_sides(lab):
    plots = list(plots_of(lab).values())
    assert plots
    for p in overlay(plots, plots):
        a, b = p.side("A"), p.side("B")
        assert p.only == "" and len(a) == len(b) > 0
        for ca, cb in zip(a, b, strict=True):
            assert ca.name == cb.name
            assert np.array_equal(ca.x, cb.x, equal_nan=True)
            assert np.array_equal(ca.y, cb.y, equal_nan=True)


def test_a_section_without_a_run_draws_nothing():
    empty = {"batching": {**section("batching"), "state": {}},
             "endpoint": {**section("endpoint"), "state": {}, "metrics": {}},
             "kv": {**section("kv"), "state": {}},
             "mcu": {**section("mcu"), "state": {}},
             "quant": {**section("quant"), "state": {}},
             "cluster": {**section("cluster"), "state": {}, "metrics": {}},
             "attention": {**section("attention"), "state": {}, "metrics": {"steps": 0}},
             "roofline": {**section("roofline"),
                          "state": {"roofs": None, "measured_points": []}}}
    for lab, sec in empty.items():
        assert plots_of(lab, sec) == {}, lab
