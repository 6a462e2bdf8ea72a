"""The attention lab's engine side: records round-trip, the section reader names bad fields,
`run` prints each execution's counted bytes equal to the closed forms and its SDPA error."""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np
import pytest
import torch

from inferlab.engines.attention.traffic import naive_traffic, split_k_traffic, tiled_traffic
from inferlab.engines.labs.attention.records import (
    AttentionRunInfo,
    AttentionSnapshot,
    step_from_dict,
    step_to_dict,
)
from inferlab.engines.labs.attention.run import add_arguments, run
from inferlab.engines.labs.attention.section import (
    attention_section,
    read_attention_section,
)
from inferlab.engines.labs.attention.session import AttentionSession, run_executions
from inferlab.engines.labs.attention.settings import ATTENTION_DEFAULTS, tile_sizes
from inferlab.engines.trace.recorder import TraceRecorder


def plain(x):
    return json.loads(json.dumps(x, allow_nan=False))


def session_records(**settings):
    s = AttentionSession(dict(ATTENTION_DEFAULTS, **settings))
    records = []
    while not s.done:
        records.append(s.step())
    return s, records


@pytest.mark.parametrize("execution", ["naive", "tiled", "split_k"])
def test_steps_round_trip_through_json(execution):
    _s, records = session_records(n=20, d=4, br=8, bc=6, causal=True, execution=execution)
    for r in records:
        back = step_from_dict(plain(step_to_dict(r)), "step")
        assert step_to_dict(back) == step_to_dict(r)
        for name in ("score_tile", "m_rows", "l_rows"):
            a, b = getattr(r, name), getattr(back, name)
            assert (a is None) == (b is None)
            if a is not None:  # NaN (a chunk not run yet) and -inf (masked) survive
                np.testing.assert_array_equal(a, b)


def test_section_round_trips_into_a_frozen_record_keeping_arrays_of_the_last_steps_only():
    s, records = session_records(n=64, d=4, br=4, bc=4)  # 256 tiles
    roof = ("cpu fp32 (measured)", 1e12, 1e11, True)
    rows = [{"n": 256, "naive_sp_bytes": 524288, "sdpa_s": 2e-4}]
    sec = plain(attention_section(ATTENTION_DEFAULTS, s.info, records, rows, (roof,)))
    read = read_attention_section(sec)
    assert isinstance(read, AttentionSnapshot)
    assert read.timings == tuple(rows) and read.roofs == (roof,)
    back = read.steps
    assert read.run == s.info and len(back) == 256 and read.settings == ATTENTION_DEFAULTS
    assert [r.bytes_read for r in back] == [r.bytes_read for r in records]
    assert back[0].score_tile is None and back[-1].score_tile is not None
    assert sec["metrics"]["bytes_read"] == tiled_traffic(64, 4, 4, 4, False, 4).bytes_read
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.steps = ()
    empty = read_attention_section(plain(attention_section(ATTENTION_DEFAULTS, None, [])))
    assert (empty.run, empty.steps, empty.timings, empty.roofs) == (None, (), (), ())


@pytest.mark.parametrize("path, value, message", [
    (("settings", "n"), 0, "labs.attention.settings.n"),
    (("state", "run", "br"), "x", "labs.attention.state.run.br"),
    (("state", "steps", 0, "q_rows"), [5, 2], "labs.attention.state.steps[0].q_rows"),
    (("state", "steps", 0, "execution"), "naive", "labs.attention.state.steps[0].execution"),
    (("state", "steps", 1, "k_rows"), [0, 99], "labs.attention.state.steps[1].k_rows"),
    (("state", "steps", 1, "step"), 9, "labs.attention.state.steps[1].step"),
    (("state", "roofs"), [["cpu", 1e11, 0.0, True]], "labs.attention.state.roofs[0][2]"),
    (("state", "run", "closed_forms", "tiled", "bytes_read"), 5,
     "labs.attention.state.run.closed_forms"),
])
def test_section_reader_names_the_bad_field(path, value, message):
    s, records = session_records(n=16, d=4, br=8, bc=8)
    sec = plain(attention_section(ATTENTION_DEFAULTS, s.info, records))
    node = sec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_attention_section(sec)


def parse(*argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


@pytest.mark.parametrize("causal", [False, True])
def test_run_counts_each_execution_as_its_closed_form(causal):
    argv = ["--n", "130", "--d", "16", "--br", "32", "--bc", "24"] + (["--causal"] * causal)
    section, summary = run(parse(*argv), TraceRecorder())
    ex = plain(summary)["executions"]
    assert summary["element_bytes"] == 4
    forms = {"naive": naive_traffic(130, 16, 4), "split_k": split_k_traffic(130, 16, 24, 4),
             "tiled": tiled_traffic(130, 16, 32, 24, causal, 4)}
    for name, form in forms.items():
        assert (ex[name]["bytes_read"], ex[name]["bytes_written"]) == \
            (form.bytes_read, form.bytes_written)
        assert ex[name]["max_abs_error_vs_sdpa"] < 1e-5
    # 5 Q tiles × 6 K tiles; causal: the K tiles starting before each Q tile's end, 2+3+4+6+6
    assert ex["tiled"]["steps"] == (21 if causal else 30)
    assert ex["split_k"]["steps"] == 6 + 1 and ex["naive"]["steps"] == 2 * 30 + 5
    assert read_attention_section(plain(section)).run.execution == "tiled"


def test_run_refuses_bad_options():
    with pytest.raises(ValueError, match="options.n"):
        run(parse("--n", "0"), TraceRecorder())


def test_tiles_from_an_on_chip_memory():
    assert tile_sizes(dict(ATTENTION_DEFAULTS, on_chip_kib=100, d=64)) == (64, 100)
    assert tile_sizes(dict(ATTENTION_DEFAULTS, br=8, bc=16)) == (8, 16)
    info = AttentionRunInfo.of(64, 8, 2, True, 16, 16, 4, "tiled")
    assert info.closed_forms["naive"] == naive_traffic(64, 8, 4, 2)


def test_a_run_of_too_many_tiles_is_refused():
    with pytest.raises(ValueError, match="134,225,920 steps"):
        AttentionSession(dict(ATTENTION_DEFAULTS, n=16384, d=4, br=1, bc=1, causal=True))


def test_naive_refuses_what_would_not_fit():
    with pytest.raises(ValueError, match="GiB"):
        AttentionSession(dict(ATTENTION_DEFAULTS, n=16384, heads=2, execution="naive"))


def test_bench_counts_match_and_times_every_implementation():
    from inferlab.engines.labs.attention.bench import counted_vs_closed_form, timings

    assert counted_vs_closed_form() == 1.0
    (row,) = timings(ns=(64,), d=8, repeats=1)
    assert row["n"] == 64 and row["naive_sp_bytes"] == 2 * 64 * 64 * 4
    assert all(row[k] > 0 for k in ("naive_s", "sdpa_s", "tiled_torch_s"))


def check_model_source(spec, n, heads):
    from inferlab.engines.labs.attention.source import model_layer_qkv
    from inferlab.engines.model.cache import load_lab_model

    cfg = load_lab_model(spec)[0].config
    q, k, v, what = model_layer_qkv(spec, cfg.n_layers - 1, n, heads)
    h = min(heads, cfg.n_heads)
    assert q.shape == k.shape == v.shape == (h, n, cfg.d_head)
    group = cfg.n_heads // cfg.n_kv_heads
    if group > 1 and h > 1:  # query heads 0 and 1 share KV head 0
        assert torch.equal(k[0], k[1]) and not torch.equal(q[0], q[1])
    assert f"layer {cfg.n_layers - 1}" in what and f"{n} tokens" in what
    s = dict(ATTENTION_DEFAULTS, source=spec, layer=cfg.n_layers - 1, n=n, heads=heads,
             br=16, bc=24, causal=True)
    out = run_executions(s)
    for name, e in out.items():
        assert e["max_abs_error_vs_sdpa"] < 1e-5, name
        assert e["bytes_read"] == e["closed_form_bytes_read"]


@pytest.mark.parametrize("spec", ["tiny", "tiny-moe"])
def test_q_k_v_of_a_model_layer_on_the_shipped_text(spec):
    check_model_source(spec, 40, 8)


def test_the_layers_before_the_chosen_one_attend_as_the_model_does():
    """The capture's attention (causal, within each layer's window) run through every layer
    is the model's own forward: a Gemma 3 layout (q/k-norms, RoPE per layer kind, a window of
    8 tokens) on 40 tokens."""
    from inferlab.engines.labs.attention.source import model_attention
    from inferlab.engines.model.tiny import tiny_model
    from tests.torch_fixtures import TINY_GEMMA3

    model, _ = tiny_model(**TINY_GEMMA3)
    ids = torch.arange(40) + 60
    write, attend, _ = model_attention(model)
    got = model.forward_with(ids, torch.arange(40), attend, write)
    torch.testing.assert_close(got, model.forward_nocache(ids, all_logits=True), atol=1e-4,
                               rtol=1e-4)  # fp32, summed in another order


@pytest.mark.slow  # loads SmolLM2
def test_q_k_v_of_a_smollm2_layer(smollm2_path):
    check_model_source("smollm2-135m", 96, 4)


def test_the_cpu_l2_is_read_from_sysfs(tmp_path):
    from inferlab.engines.labs.attention.settings import cpu_l2_kib

    for i, (level, size) in enumerate((("1", "32K"), ("1", "32K"), ("2", "2M"), ("3", "32M"))):
        (tmp_path / f"index{i}").mkdir()
        (tmp_path / f"index{i}" / "level").write_text(level + "\n")
        (tmp_path / f"index{i}" / "size").write_text(size + "\n")
    assert cpu_l2_kib(str(tmp_path)) == 2048
    assert cpu_l2_kib(str(tmp_path / "absent")) is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_timings_and_the_flash_backend():
    from inferlab.engines.labs.attention.bench import sdpa_flash_bf16, timings

    q, k, v = (torch.randn(2, 300, 64, device="cuda") for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(sdpa_flash_bf16(q, k, v, True).float(), ref, rtol=0, atol=3e-2)
    (row,) = timings(ns=(512,), repeats=1, device="cuda:0")
    assert all(row[k] > 0 for k in ("naive_s", "sdpa_s", "tiled_torch_s", "sdpa_flash_bf16_s"))
    from inferlab.engines.attention.triton_flash import triton_available

    assert (row.get("triton_flash_bf16_s", 0) > 0) == triton_available()
