"""`inferlab run speculative`: a snapshot the reader accepts, with a span per step holding its
draft and verify spans; greedy output equal to plain greedy decoding; bad options named in a
one-line error, nothing written."""

from __future__ import annotations

import json

import pytest

from inferlab.engines.labs.speculative.section import read_speculative_section
from inferlab.engines.model.generate import generate

PROMPT = "the cat sat on the mat. the cat sat on the"


@pytest.mark.parametrize("drafter", ["ngram", "layerskip:1", "quant:int8", "quant:int4", "tiny"])
def test_greedy_run_is_plain_greedy_decoding(capsys, tmp_path, tiny, drafter):
    from inferlab.app.cli import main
    from inferlab.engines.trace.snapshot import read_snapshot

    out = tmp_path / "spec.json"
    assert main(["run", "speculative", "--drafter", drafter, "--k", "3", "--prompt", PROMPT,
                 "--raw", "--max-tokens", "24", "--snapshot", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["lab"] == "speculative"
    m = printed["metrics"]
    model, tok = tiny
    ids = tok.encode_prompt(PROMPT, chat=False)
    plain = generate(model, [ids], max_new_tokens=24).generations[0].token_ids
    assert m["token_ids"] == list(plain)
    assert 1 <= m["target_forwards"] <= 24
    assert m["tokens_per_target_forward"] == pytest.approx(24 / m["target_forwards"])
    assert 0 <= m["acceptance_rate"] <= 1

    snapshot = read_snapshot(out)
    assert snapshot.active_lab == "speculative"
    read = read_speculative_section(snapshot.labs["speculative"])
    settings, header, steps, metrics = read.settings, read.header, read.steps, read.metrics
    assert settings["drafter"] == drafter and settings["k"] == 3 and settings["raw"]
    assert header.prompt_token_ids == tuple(ids)
    assert [t for s in steps for t in s.token_ids] == m["token_ids"]
    assert metrics["target_forwards"] == len(steps) == m["target_forwards"]
    events = snapshot.trace_events
    spans = [e for e in events if e.get("name", "").startswith("step ")]
    assert len(spans) == len(steps)
    for span in spans:  # the draft and the verify forward inside each step's span
        inside = sorted(e["name"] for e in events if e.get("name") in ("draft", "verify")
                        and e["tid"] == span["tid"] and span["ts"] - 0.01 <= e["ts"]
                        and e["ts"] + e["dur"] <= span["ts"] + span["dur"] + 0.01)
        assert inside == ["draft", "verify"]


@pytest.mark.parametrize("drafter", ["layerskip:1", "quant:int4", "tiny"])
def test_a_mixture_of_experts_target_drafts_exactly(capsys, drafter):
    """tiny-moe: its first layer, its own experts quantized one by one, or the tiny model
    (their byte vocabulary is one) draft; greedy output stays the target's own."""
    from inferlab.app.cli import main
    from inferlab.engines.model.cache import load_lab_model

    assert main(["run", "speculative", "--model", "tiny-moe", "--drafter", drafter, "--k", "3",
                 "--prompt", PROMPT, "--raw", "--max-tokens", "12", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    model, tok = load_lab_model("tiny-moe")
    plain = generate(model, [tok.encode(PROMPT)], max_new_tokens=12).generations[0].token_ids
    assert m["model"] == "tiny-moe" and m["token_ids"] == list(plain)


def test_a_run_with_sampling_is_seeded(capsys, tmp_path):
    from inferlab.app.cli import main

    outs = []
    for name in ("a", "b"):
        assert main(["run", "speculative", "--temperature", "0.8", "--top-p", "0.9",
                     "--max-tokens", "16", "--snapshot", str(tmp_path / f"{name}.json"),
                     "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out)["metrics"]["token_ids"])
    assert outs[0] == outs[1] and len(outs[0]) == 16


@pytest.mark.parametrize(("argv", "message"), [
    (["--k", "0"], "--k: expected an integer in 1..32, got 0"),
    (["--top-p", "0"], "--top-p: expected a number in (0, 1], got 0.0"),
    (["--top-p", "1.5"], "--top-p: expected a finite number in 0..1, got 1.5"),
    (["--prompt", "  "], "--prompt: expected some text, got an empty prompt"),
    (["--drafter", "hydra"], "--drafter: expected ngram, layerskip:N"),
    (["--drafter", "layerskip:2"], "--drafter: layerskip:2 cannot draft for tiny: n_layers"),
    (["--max-tokens", "0"], "--max-tokens: expected an integer in 1..1,024, got 0"),
    (["--temperature", "-1"], "--temperature: expected"),
    (["--tree-width", "0"], "--tree-width: expected an integer in 1..8, got 0"),
    (["--tree-width", "9"], "--tree-width: expected an integer in 1..8, got 9"),
    (["--tree-width", "2", "--drafter", "layerskip:1"],
     "--tree-width: expected 1 with the layerskip:1 drafter (token trees are the n-gram"),
])
def test_bad_options_give_one_line_errors(capsys, tmp_path, argv, message):
    from inferlab.app.cli import main

    assert main(["run", "speculative", *argv, "--snapshot", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "x.json").exists()


def test_a_drafter_with_another_vocabulary_is_refused(monkeypatch):
    """The tiny drafter (256 byte tokens) for a target of another vocabulary."""
    from types import SimpleNamespace

    from inferlab.engines.labs.speculative import run as spec_run
    from inferlab.engines.model import cache as models
    from inferlab.engines.model.tiny import tiny_model

    wide = tiny_model(vocab_size=300)
    monkeypatch.setattr(models, "load_lab_model", lambda spec, device="cpu", **_: wide)
    args = SimpleNamespace(model="wide", drafter="tiny", k=2, temperature=0.0, top_p=1.0,
                           prompt="hello", raw=True, max_tokens=4, seed=0, device="cpu")
    from inferlab.engines.trace.recorder import TraceRecorder

    with pytest.raises(ValueError, match=r"^--drafter: tiny cannot draft for wide: its "
                                         r"vocabulary has 256 tokens, the target's 300"):
        spec_run.run(args, TraceRecorder())


def test_a_tree_run_is_plain_greedy_decoding_and_its_snapshot_holds_the_trees(capsys, tmp_path,
                                                                             tiny):
    from inferlab.app.cli import main
    from inferlab.engines.trace.snapshot import read_snapshot

    out = tmp_path / "tree.json"
    assert main(["run", "speculative", "--tree-width", "3", "--k", "3", "--prompt", PROMPT,
                 "--raw", "--max-tokens", "24", "--snapshot", str(out), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    model, tok = tiny
    ids = tok.encode_prompt(PROMPT, chat=False)
    assert m["token_ids"] == list(generate(model, [ids], max_new_tokens=24).generations[0]
                                  .token_ids)
    assert m["tree_width"] == 3
    read = read_speculative_section(read_snapshot(out).labs["speculative"])
    settings, header, steps = read.settings, read.header, read.steps
    assert settings["tree_width"] == header.tree_width == 3
    assert any(s.tree_tokens for s in steps)
    events = read_snapshot(out).trace_events
    assert any("tree_nodes" in e.get("args", {}) for e in events)


def test_without_a_snapshot_and_beside_plain_decoding(capsys, tmp_path, monkeypatch):
    """No --snapshot: the figures only (nothing written); --compare-plain decodes the same
    prompt plainly in the same run and reports both wall times and their ratio."""
    from inferlab.app.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", "speculative", "--model", "tiny", "--max-tokens", "24",
                 "--compare-plain", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["snapshot"] is None and not list(tmp_path.iterdir())
    m = out["metrics"]
    assert m["outputs_equal"] is True  # greedy: the same tokens either way
    assert m["decode_s"] > 0 and m["plain_decode_s"] > 0
    assert m["speedup_wall"] == pytest.approx(m["plain_decode_s"] / m["decode_s"])
    assert len(m["draft_lengths"]) == m["target_forwards"]
    assert all(0 <= n <= 4 for n in m["draft_lengths"])  # K = 4 at most; fewer: no n-gram


def test_k_auto_chooses_each_steps_k_and_keeps_greedy_output(capsys, tiny):
    from inferlab.app.cli import main

    assert main(["run", "speculative", "--model", "tiny", "--prompt", PROMPT, "--raw",
                 "--max-tokens", "30", "--k", "auto", "--compare-plain", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["outputs_equal"] is True
    plain = generate(tiny[0], [list(PROMPT.encode())], max_new_tokens=30).generations[0]
    assert tuple(m["token_ids"]) == tuple(plain.token_ids)[:len(m["token_ids"])]
    chosen, drafted = m["k_chosen"], m["draft_lengths"]
    assert len(chosen) == len(drafted) == m["target_forwards"]
    assert all(0 <= d <= k <= 8 for d, k in zip(drafted, chosen, strict=True))


def test_adaptive_k_is_refused_with_token_trees():
    from inferlab.engines.labs.speculative.settings import (
        check_speculative_settings,
        speculative_defaults,
    )

    with pytest.raises(ValueError, match="adaptive_k"):
        check_speculative_settings(dict(speculative_defaults(), adaptive_k=True, tree_width=2))


def test_compare_plain_keeps_the_run_as_a_point_of_the_speedup_plot(capsys, tmp_path):
    """With --snapshot, --compare-plain's wall times and the model's prediction (its v(K)
    timed in the run) are kept as a one-point K sweep that the lab reads back and draws."""
    from inferlab.app.cli import main
    from inferlab.engines.trace.snapshot import read_snapshot

    out_path = tmp_path / "s.json"
    assert main(["run", "speculative", "--model", "tiny", "--max-tokens", "16", "--k", "3",
                 "--compare-plain", "--snapshot", str(out_path), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    sweep = read_speculative_section(read_snapshot(out_path).labs["speculative"]).sweep
    (point,) = sweep.points
    assert (point.k, sweep.drafter, sweep.model) == (3, "ngram", "tiny")
    assert point.plain_s == pytest.approx(m["plain_decode_s"])
    assert point.speculative_s == pytest.approx(m["decode_s"])
    assert point.speedup_wall == pytest.approx(m["speedup_wall"])
    assert point.outputs_equal and point.emitted_tokens == len(m["token_ids"])
    assert point.predicted_speedup == pytest.approx(m["predicted_speedup"])
    assert point.verify_cost_ratio == m["verify_cost_ratio"] >= 1.0
    assert point.target_forwards == m["target_forwards"]
