"""Every lab that runs a real model, on Gemma 3 270M (the real file, held as its codes; one
load for the module, through the app's model cache that the labs read): `generate` keeps its
JSON and runs raw (no chat template), the attention lab's layer capture attends as the model
does past the 512-token window, speculative drafts stay exact and the byte-level tiny draft is
refused by name, the batching wall clock serves and says which linears dequantize, the
roofline and memory labs read the loaded description, the quant lab scores the fp32 weights
with one BOS."""

from __future__ import annotations

import json

import pytest
import torch

from inferlab.engines.model.cache import load_lab_model

pytestmark = pytest.mark.slow
PROMPT = "The history of the lighthouse begins with fires lit on hills"


@pytest.fixture(scope="module")
def gemma():
    """(model, tokenizer) of Gemma 3 270M as the labs load it (codes, native path)."""
    try:
        return load_lab_model("gemma3-270m")
    except ValueError as e:  # the package is not installed
        pytest.skip(str(e))


def test_generate_and_the_attention_capture(gemma, capsys, monkeypatch):
    from inferlab.app.cli import main
    from inferlab.app.commands import generate as generate_cmd
    from inferlab.engines.labs.attention.source import model_attention, model_layer_qkv

    model, tok = gemma
    monkeypatch.setattr(generate_cmd, "load_model", lambda *a, **k: gemma)  # the one load
    assert main(["generate", "--model", "gemma3-270m", "--prompt", PROMPT, "--max-tokens", "4",
                 "--greedy", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert {"prompt_token_ids", "token_ids", "tokens_per_s"} <= set(out)
    assert out["prompt_token_ids"] == tok.encode(PROMPT) and out["prompt_token_ids"][0] == 2
    assert out["chat_template"] is False and len(out["token_ids"]) == 4
    assert "gemma3-270m has no chat template: the prompt runs raw" in captured.err

    # every layer attending within its window, as the model: its own logits, 600 tokens
    ids = torch.tensor(tok.encode("The keeper climbed the stairs. " * 100)[:600])
    write, attend, _ = model_attention(model)
    got = model.forward_with(ids, torch.arange(600), attend, write,
                             logits_index=torch.tensor([599]))
    want = model.forward_nocache(ids)
    assert int(got.argmax()) == int(want.argmax())
    assert (got - want).abs().max() < 1e-3 * want.abs().max()
    q, k, v, what = model_layer_qkv("gemma3-270m", 0, 600, 4)
    assert q.shape == (4, 600, 256) and torch.equal(k[0], k[3])  # one KV head for four
    assert "a sliding-window layer: the model attends over its last 512 tokens" in what


def test_speculative_drafts_stay_exact_and_tiny_is_refused_by_name(gemma):
    from inferlab.engines.labs.speculative.session import SpeculativeSession
    from inferlab.engines.labs.speculative.settings import speculative_defaults
    from inferlab.engines.model.generate import generate

    model, tok = gemma
    settings = dict(speculative_defaults(), model="gemma3-270m", prompt=PROMPT, max_tokens=8)
    with pytest.raises(ValueError, match=r"^drafter: tiny cannot draft for gemma3-270m: its "
                                         r"vocabulary has 256 tokens, the target's 262,144"):
        SpeculativeSession(dict(settings, drafter="tiny"))
    session = SpeculativeSession(dict(settings, drafter="quant:int4"))
    while not session.done:
        session.step()
    plain = generate(model, [tok.encode(PROMPT)], max_new_tokens=8).generations[0].token_ids
    assert list(session.run().token_ids) == list(plain)
    assert "no chat template" in session.note and "re-quantizes" in session.note
    assert session.decoder.drafter.model.lm_head is model.lm_head  # the file's Q8_0, kept


def test_batching_wall_clock_and_the_description_readers(gemma):
    from inferlab.engines.hardware.presets import load_hardware_preset
    from inferlab.engines.labs.batching.session import batching_session
    from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
    from inferlab.engines.labs.memory.session import memory_plans, preset_target
    from inferlab.engines.labs.memory.settings import MEMORY_DEFAULTS
    from inferlab.engines.labs.roofline.session import roofline_model
    from inferlab.engines.serve.workload import WorkloadRequest

    items = [WorkloadRequest(0.0, 60, 4), WorkloadRequest(0.0, 12, 6)]  # 72 rows, then 2
    session = batching_session(dict(BATCHING_DEFAULTS, clock="wall", model="gemma3-270m",
                                    requests=2), items=items)
    while not session.done:
        session.step()
    assert session.serving_metrics().completed == 2
    assert "Q4_K codes" in session.linears_note and "dequantizes" in session.linears_note

    cfg = roofline_model("gemma3-270m", load=False)  # loaded above: its own description
    assert cfg is gemma[0].config and cfg.sliding_window == 512
    plan, _ = memory_plans(dict(MEMORY_DEFAULTS, context=8192), cfg,
                           preset_target(load_hardware_preset("h100-sxm")))
    # 3 global layers hold 8192 tokens, 15 sliding ones 512: K and V of one 256-wide head
    assert plan.kv_bytes_total == (3 * 8192 + 15 * 512) * 2 * 256 * 2


def test_quant_lab_scores_the_fp32_weights_with_one_bos(gemma):
    from inferlab.engines.labs.quant.session import QuantSession
    from inferlab.engines.quant.evaluate import score_held_out

    session = QuantSession.open("gemma3-270m", eval_text=PROMPT + " and on headlands. " * 6)
    assert not any(k.endswith(" codes") for k in _kinds(session.model))  # fp32 Linears
    ids = session.eval_sets["eval"]
    assert ids[0] == 2 and ids.count(2) == 1
    assert "gemma-3-270m-q4_k_m.gguf dequantized to fp32" in session.source_note
    # as the lab scores each scheme (`score_held_out`), on the fp32 weights
    assert 1 < score_held_out(session.model, session.eval_sets, **session.ppl()).mean < 200


def _kinds(model):
    from inferlab.engines.model.linear_costs import linear_paths

    return linear_paths(model).kinds
