"""`inferlab generate` on the tiny model: JSON fields, cache vs no cache, errors."""

import json

import pytest

from inferlab.app.cli import main


def run_json(capsys, *args):
    assert main(["generate", "--model", "tiny", "--prompt", "hi", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_fields(capsys):
    out = run_json(capsys, "--max-tokens", "5", "--greedy")
    assert {"prompt_token_ids", "token_ids", "text", "tokens_per_s"} <= set(out)
    assert out["prompt_token_ids"] == [104, 105]  # tiny has no chat template: raw bytes
    assert len(out["token_ids"]) == 5 and all(0 <= t < 256 for t in out["token_ids"])
    assert isinstance(out["text"], str) and out["tokens_per_s"] > 0
    assert out["cache"] is True and out["finish_reason"] == "length"
    assert out["threads"] >= 1


def test_any_model_keeps_the_json_keys_and_says_it_runs_raw(capsys):
    # tiny-moe (a Qwen3-MoE layout): no chat template, so the prompt runs raw, and says so
    assert main(["generate", "--model", "tiny-moe", "--prompt", "hi", "--max-tokens", "3",
                 "--greedy", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert {"prompt_token_ids", "token_ids", "tokens_per_s"} <= set(out)
    assert out["model"] == "tiny-moe" and out["prompt_token_ids"] == [104, 105]
    assert out["chat_template"] is False and len(out["token_ids"]) == 3
    assert "tiny-moe has no chat template: the prompt runs raw" in captured.err


def test_no_cache_gives_the_same_tokens(capsys):
    cached = run_json(capsys, "--max-tokens", "8", "--greedy")
    ref = run_json(capsys, "--max-tokens", "8", "--greedy", "--no-cache")
    assert ref["cache"] is False and ref["token_ids"] == cached["token_ids"]


def test_seeded_sampling_is_reproducible(capsys):
    a = run_json(capsys, "--max-tokens", "8", "--seed", "3", "--temperature", "1.2")
    b = run_json(capsys, "--max-tokens", "8", "--seed", "3", "--temperature", "1.2")
    assert a["token_ids"] == b["token_ids"]


def test_text_output(capsys):
    assert main(["generate", "--model", "tiny", "--prompt", "hi", "--max-tokens", "3",
                 "--greedy", "--raw", "--dtype", "bf16"]) == 0
    captured = capsys.readouterr()
    assert "tokens/s decode" in captured.err


@pytest.mark.parametrize("args, message", [
    (["--model", "nope"], "unknown model 'nope'"),
    (["--model", "tiny", "--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["--model", "tiny", "--device", "cuda:9"], "'cuda:9' is not available"),
    (["--model", "tiny", "--threads", "0"], "--threads must be at least 1"),
])
def test_errors_are_one_line(capsys, args, message):
    assert main(["generate", "--prompt", "hi", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
