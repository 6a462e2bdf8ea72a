"""The radix prefix cache under the tiny model: a hit that ends inside a block, a multi-turn
conversation hitting its previous answer, greedy outputs equal to running without a cache."""

from __future__ import annotations

import torch

from inferlab.engines.model.runner import ModelRunner

TOL = 2e-5


def ids(text: str) -> list[int]:
    return list(text.encode())


def _decode(runner: ModelRunner, sid, prompt, n_new: int) -> list[int]:
    """Greedy: add, prefill, n_new decodes; the sequence stays (free it to cache it)."""
    runner.add(sid, prompt)
    out = []
    logits = runner.step([sid])
    for _ in range(n_new):
        token = int(logits[0].argmax())
        out.append(token)
        runner.append(sid, token)
        logits = runner.step([sid])
    return out


def test_a_hit_ending_inside_a_block_keeps_the_logits_exact(tiny):
    model, _ = tiny
    system = ids("You are a helpful assistant. ")  # 29 tokens: 7 blocks of 4 and 1 token
    runner = ModelRunner(model, n_blocks=64, block_size=4, prefix_cache="radix")
    runner.add("a", system + ids("Hi!"))
    runner.step(["a"])
    runner.free("a")
    n_cached = runner.add("b", system + ids("Hey"))  # "...assistant. H" shared: 30 tokens
    assert n_cached == 30 and runner.pending("b") == 2
    logits = runner.step(["b"])
    ref = model.forward_nocache(torch.tensor(system + ids("Hey")))
    assert (logits - ref).abs().max() < TOL


def test_multi_turn_hits_the_previous_answer_and_decodes_as_without_a_cache(tiny):
    model, _ = tiny
    turn1 = ids("User: name a colour.\nBot:")
    plain = ModelRunner(model, n_blocks=64, block_size=4, prefix_cache="none")
    radix = ModelRunner(model, n_blocks=64, block_size=4, prefix_cache="radix")
    hashed = ModelRunner(model, n_blocks=64, block_size=4, prefix_cache="hash")
    answers = {}
    for name, runner in (("none", plain), ("radix", radix), ("hash", hashed)):
        answer = _decode(runner, "t1", turn1, 6)
        runner.free("t1")
        turn2 = turn1 + answer + ids("\nUser: another?\nBot:")
        n_cached = runner.blocks.cached_prefix_len(turn2)
        answers[name] = (answer, _decode(runner, "t2", turn2, 6), n_cached)
    assert answers["none"][:2] == answers["radix"][:2] == answers["hash"][:2]
    # turn 1's prompt and its whole answer (each answer token was fed back, so its K/V is
    # written) are cached; hash keeps only their whole blocks
    computed = len(turn1) + 6
    assert answers["radix"][2] == computed
    assert answers["hash"][2] == computed // 4 * 4
    assert answers["none"][2] == 0
