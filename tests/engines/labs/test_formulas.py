"""Each lab's formulas with a snapshot's numbers (engines/labs/<id>/formulas.py, named by its
registry entry): the substituted results are the section's own figures, computed by the
engine functions that hold the formulas; a section without a run gives none."""

from __future__ import annotations

import functools

import pytest

from inferlab.app.labs.registry import LABS, lab_spec, resolve
from inferlab.engines.roofline.interconnect import kv_transfer_s
from tests.app.lab_sections import BUILDERS

WITH_FORMULAS = ("roofline", "memory", "cluster", "speculative", "attention", "moe")


@functools.cache
def section(lab: str) -> dict:
    return BUILDERS[lab]()


def formulas_of(lab: str, sec: dict | None = None) -> dict[str, str]:
    spec = lab_spec(lab)
    read = resolve(spec.read_section)(section(lab) if sec is None else sec)
    return dict(resolve(spec.formulas)(read))


def test_the_labs_with_formulas_in_their_engines_name_them():
    assert [s.id for s in LABS if s.formulas] == [s.id for s in LABS if s.id in WITH_FORMULAS]


def test_roofline_knees_and_points_are_the_sections():
    f = formulas_of("roofline")  # the fixture: P = 1e11 (fp32), 5e10 (bf16); W = 2e10 B/s
    assert f["knee I* = P / W (cpu, fp32)"] == "100 GFLOP/s / 20 GB/s = 5 FLOP/byte"
    assert f["knee I* = P / W (cpu, bf16)"].endswith("= 2.5 FLOP/byte")
    gemv = f["attainable = min(P, I × W), I = F / B (decode gemv, fp32)"]
    assert "= 0.5 FLOP/byte" in gemv and "= 10 GFLOP/s, memory-bound" in gemv
    assert "compute-bound" in f["attainable = min(P, I × W), I = F / B (matmul 256, fp32)"]


def test_memory_results_are_the_sections_figures():
    m = section("memory")["metrics"]
    f = formulas_of("memory")
    kv = f["KV per token = 2 × layers × KV heads × d_head × bytes(kv_dtype)"]
    assert kv == f"2 × 32 × 8 × 128 × 2 B = {m['kv_bytes_per_token']:,} B (128.00 KiB)"
    assert f"= {m['kv_bytes_total']:,} B" in f["KV for the batch = KV per token × context × batch"]
    assert f["largest batch = ⌊(budget − weights) ÷ KV per request⌋"].endswith(
        f"= {m['max_batch']:,} sequences")
    assert f["longest context = ⌊(budget − weights) ÷ (KV per token × batch)⌋"].endswith(
        f"= {m['max_context']:,} tokens")
    assert any(k.startswith("decode tokens/s ≤") for k in f)  # the preset's bandwidth is known


def test_attention_closed_forms_are_the_runs():
    sec = section("attention")
    forms, m = sec["state"]["run"]["closed_forms"], sec["metrics"]
    f = formulas_of("attention")
    for name, form in forms.items():
        text = next(v for k, v in f.items()
                    if k.lower().startswith(name.replace("_", "-") + " reads"))
        assert f"= {form['bytes_read']:,} B" in text and f"= {form['bytes_written']:,} B" in text
    counted = next(v for k, v in f.items() if k.startswith("counted"))
    assert f"read {m['bytes_read']:,} B" in counted
    assert f"of {m['closed_form_bytes_read']:,} B" in counted


def test_cluster_transfer_and_utilisation_are_the_runs():
    sec = section("cluster")
    state, m = sec["state"], sec["metrics"]
    f = formulas_of("cluster")
    moved = max((r for r in state["requests"] if r["kv_transfer_s"] > 0),
                key=lambda r: r["prompt_tokens"])
    link = state["link"]
    t = kv_transfer_s(state["kv_bytes_per_token"], moved["prompt_tokens"],
                      link["bandwidth_bytes_per_s"], link["latency_s"])
    assert t == pytest.approx(moved["kv_transfer_s"], rel=1e-12)
    transfer = next(v for k, v in f.items() if k.startswith("KV transfer"))
    assert transfer.endswith(f"= {t * 1e3:.4g} ms")
    shares = [v for k, v in f.items() if k.startswith("utilisation")]
    assert [s.rsplit("= ", 1)[1] for s in shares] == [f"{u:.1%}" for u in m["utilization"]]
    goodput = next(v for k, v in f.items() if k.startswith("goodput per GPU"))
    assert goodput.endswith(f"= {m['goodput_per_gpu']:.4g} req/s per GPU")


def test_speculative_theory_is_the_runs():
    """The substituted E equals the section's own theory figures (metrics.py computes them
    with the same statistics functions) and the measured tokens per forward its metric."""
    sec = section("speculative")
    m, k = sec["metrics"], sec["state"]["k"]
    f = formulas_of("speculative")
    a = m["alpha"]
    e = f["E = (1 − α^(K+1)) / (1 − α), tokens per target forward with K drafts every step"]
    assert e == f"(1 − {a:.4f}^{k + 1}) / (1 − {a:.4f}) = {m['theory_tokens_per_forward']:.3f}"
    drafted = f["E_drafted = mean over steps of E(kᵢ), kᵢ each step's own draft length "
                "(E(0) = 1)"]
    assert drafted.startswith(f"{m['theory_drafted_tokens_per_forward']:.3f} over "
                              f"{m['target_forwards']} steps")
    assert drafted.endswith(f"= {m['tokens_per_target_forward']:.3f}")


def test_a_section_without_a_run_gives_no_formulas():
    assert formulas_of("cluster", {**section("cluster"), "state": {}, "metrics": {}}) == {}
    assert formulas_of("attention", {**section("attention"), "state": {},
                                     "metrics": {"steps": 0}}) == {}
    assert formulas_of("roofline", {**section("roofline"),
                                    "state": {"roofs": None, "measured_points": []}}) == {}
