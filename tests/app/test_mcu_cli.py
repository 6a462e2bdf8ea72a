"""`inferlab mcu plan / invoke / reorder` and `inferlab bench mcu`, through `app.cli.main`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inferlab.app.cli import main
from inferlab.engines.mcu.examples import example_path, examples_dir
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.model_planners import plan_model, planner_names

ROOT = Path(__file__).resolve().parents[2]
MODELS_DIR = examples_dir()


def model_path(stem: str) -> Path:
    return example_path(stem)


def run_json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == ""
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("inferlab mcu: error: ")
    return err


def random_input(model, seed=0) -> np.ndarray:
    t = model.tensors[model.inputs[0]]
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, size=t.shape, dtype=np.int64).astype(np.dtype(t.dtype))


@pytest.mark.parametrize("planner", ["linear", "tflm-greedy", "best"])
def test_plan_json_has_every_tensor(capsys, planner):
    path = model_path("person_detect")
    data = run_json(capsys, "mcu", "plan", str(path), "--planner", planner, "--json")
    want = plan_model(load_model(path), planner)
    assert data["planner"] == planner and data["model"] == "person_detect"
    assert data["arena_bytes"] == want.arena_bytes
    assert data["lower_bound_bytes"] == 55296
    if planner == "tflm-greedy":
        assert data["arena_bytes"] == 55296
    assert len(data["buffers"]) == len(want.buffers)
    for b, w, o in zip(data["buffers"], want.buffers, want.offsets, strict=True):
        assert {"offset", "size", "first", "last", "tensor", "name"} <= set(b)
        assert (b["offset"], b["size"], b["first"], b["last"]) == (o, w.size, w.first, w.last)
        assert b["tensor"] == w.tensor


def test_plan_defaults_to_tflm_greedy_and_prints_a_table(capsys):
    assert main(["mcu", "plan", str(model_path("micro_speech_quantized"))]) == 0
    out = capsys.readouterr().out
    assert "tflm-greedy plan, arena 5,968 B" in out and "offset" in out


def test_plan_beyond_tflm(capsys):
    path = str(model_path("person_detect"))
    patched = run_json(capsys, "mcu", "plan", path, "--planner", "patch-based", "--json")
    assert patched["arena_bytes"] <= 55296 // 2
    assert patched["patch"]["grid"] == [4, 4]
    assert len(patched["step_labels"]) > len(load_model(path).operators)
    speech = str(model_path("micro_speech_quantized"))
    aliased = run_json(capsys, "mcu", "plan", speech, "--planner", "aliased", "--json")
    assert aliased["aliases"] and aliased["arena_bytes"] == 5968
    reordered = run_json(capsys, "mcu", "plan", speech, "--planner", "reordered", "--json")
    assert reordered["op_order"] == [0, 1, 2, 3]


@pytest.mark.parametrize("planner", ["tflm-greedy", "best", "patch-based", "aliased"])
def test_invoke_writes_the_interpreters_output(capsys, tmp_path, planner):
    path = model_path("person_detect")
    model = load_model(path)
    x = random_input(model, 4)
    np.save(tmp_path / "in.npy", x)
    out = tmp_path / "out.npy"
    data = run_json(capsys, "mcu", "invoke", str(path), "--input", str(tmp_path / "in.npy"),
                    "--output", str(out), "--planner", planner, "--json")  # fmt: skip
    got = np.load(out)
    want = ArenaInterpreter(model, plan_model(model)).invoke(x)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert data["outputs"][0]["shape"] == [1, 2] and data["arena_bytes"] > 0
    assert len(data["op_times_ms"]) == len(model.operators)


def test_invoke_plain_text(capsys, tmp_path):
    path = model_path("hello_world_int8")
    np.save(tmp_path / "x.npy", np.array([[17]], dtype=np.int8))
    assert main(["mcu", "invoke", str(path), "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "y.npy")]) == 0  # fmt: skip
    assert "wrote int8 [1, 1]" in capsys.readouterr().out
    assert np.load(tmp_path / "y.npy").shape == (1, 1)


def test_reorder_writes_a_model_tflm_can_run(capsys, tmp_path):
    from tests.engines.mcu.mcu_int8_graphs import random_branchy_graph

    for seed in range(40):
        src = tmp_path / f"g{seed}.tflite"
        src.write_bytes(random_branchy_graph(seed))
        dst = tmp_path / f"g{seed}_reordered.tflite"
        data = run_json(capsys, "mcu", "reorder", str(src), "--output", str(dst), "--json")
        assert data["reordered_tflm_greedy_bytes"] <= data["tflm_greedy_bytes"]
        if data["changed"]:
            break
    assert data["changed"], "no random graph was reordered"
    assert [op.op for op in load_model(dst).operators] == [
        load_model(src).operators[i].op for i in data["op_order"]
    ]


# ---- bad input: one line each ---------------------------------------------------------------


def test_truncated_and_wrong_magic_files(capsys, tmp_path):
    raw = model_path("hello_world_int8").read_bytes()
    (tmp_path / "short.tflite").write_bytes(raw[:6])
    (tmp_path / "cut.tflite").write_bytes(raw[: len(raw) // 3])
    (tmp_path / "magic.tflite").write_bytes(raw[:4] + b"NOPE" + raw[8:])
    assert "truncated" in run_error(capsys, "mcu", "plan", str(tmp_path / "short.tflite"))
    err = run_error(capsys, "mcu", "plan", str(tmp_path / "cut.tflite"))
    assert "truncated" in err or "corrupt" in err
    assert "identifier" in run_error(capsys, "mcu", "plan", str(tmp_path / "magic.tflite"))
    assert "No such file" in run_error(capsys, "mcu", "plan", str(tmp_path / "absent.tflite"))


def test_unknown_planner_lists_them_all(capsys):
    err = run_error(capsys, "mcu", "plan", str(model_path("hello_world_int8")), "--planner", "x")
    assert all(name in err for name in planner_names())


def test_invoke_errors(capsys, tmp_path):
    kws = str(model_path("keyword_scrambled_8bit"))
    k_in = np.zeros(load_model(kws).tensors[load_model(kws).inputs[0]].shape, dtype=np.int8)
    np.save(tmp_path / "k.npy", k_in)
    err = run_error(capsys, "mcu", "invoke", kws, "--input", str(tmp_path / "k.npy"),
                    "--output", str(tmp_path / "o.npy"))  # fmt: skip
    assert "SVDF" in err and "not supported" in err
    hello = str(model_path("hello_world_int8"))
    np.save(tmp_path / "wide.npy", np.zeros((1, 2), dtype=np.int8))
    err = run_error(capsys, "mcu", "invoke", hello, "--input", str(tmp_path / "wide.npy"),
                    "--output", str(tmp_path / "o.npy"))  # fmt: skip
    assert "shape [1, 2]" in err and "[1, 1]" in err
    np.save(tmp_path / "float.npy", np.zeros((1, 1), dtype=np.float32))
    err = run_error(capsys, "mcu", "invoke", hello, "--input", str(tmp_path / "float.npy"),
                    "--output", str(tmp_path / "o.npy"))  # fmt: skip
    assert "float32" in err
    (tmp_path / "junk.npy").write_bytes(b"not an array")
    run_error(capsys, "mcu", "invoke", hello, "--input", str(tmp_path / "junk.npy"),
              "--output", str(tmp_path / "o.npy"))  # fmt: skip
    err = run_error(capsys, "mcu", "invoke", hello, "--planner", "patch-based",
                    "--input", str(tmp_path / "wide.npy"), "--output", str(tmp_path / "o.npy"))  # fmt: skip
    assert "no stage to run patch by patch" in err
    assert not (tmp_path / "o.npy").exists()


def test_bench_mcu_json(capsys):
    data = run_json(capsys, "bench", "mcu", "--json")
    person = data["models"]["person_detect"]
    assert person["tflm_greedy_bytes"] == 55296
    assert person["patch_based_bytes"] <= 55296 // 2
    assert data["models"]["hello_world_int8"]["patch_based_bytes"] is None


def test_a_shipped_example_is_named_by_its_stem(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no file of that name here: the shipped example is meant
    data = run_json(capsys, "mcu", "plan", "hello_world_int8", "--json")
    assert Path(data["path"]) == example_path("hello_world_int8")
    assert data["arena_bytes"] > 0
