"""Generation on the tiny model: paged cache == full recompute, sampling, stopping."""

import pytest

from inferlab.engines.model.generate import generate
from inferlab.engines.model.sampler import Sampler, SamplingParams

PROMPTS = ["a", "hello there", "The quick brown fox jumps over the lazy dog, again and again.",
           "paged KV"]


def encode(texts):
    return [list(t.encode()) for t in texts]


def test_greedy_batched_ragged_paged_equals_recompute(tiny):
    model, _ = tiny
    prompts = encode(PROMPTS)
    cached = generate(model, prompts, max_new_tokens=40, block_size=4)
    ref = generate(model, prompts, max_new_tokens=40, use_cache=False)
    assert cached.use_cache and not ref.use_cache
    for a, b, p in zip(cached.generations, ref.generations, prompts, strict=True):
        assert a.prompt_token_ids == tuple(p)
        assert len(a.token_ids) == 40 and a.finish_reason == "length"
        assert a.token_ids == b.token_ids
    assert cached.decode_tokens == 4 * 39 and cached.tokens_per_s > 0


def test_batched_generation_equals_each_prompt_alone(tiny):
    model, _ = tiny
    prompts = encode(PROMPTS)
    together = generate(model, prompts, max_new_tokens=12)
    for p, g in zip(prompts, together.generations, strict=True):
        assert generate(model, [p], max_new_tokens=12).generations[0].token_ids == g.token_ids


def test_stop_token_ends_one_sequence_and_is_not_returned(tiny):
    model, _ = tiny
    prompts = encode(PROMPTS[:2])
    free = generate(model, prompts, max_new_tokens=10).generations
    stop = free[0].token_ids[3]
    out = generate(model, prompts, max_new_tokens=10, stop_token_ids=[stop]).generations
    first = free[0].token_ids.index(stop)
    assert out[0].token_ids == free[0].token_ids[:first] and out[0].finish_reason == "stop"
    if stop not in free[1].token_ids:
        assert out[1].token_ids == free[1].token_ids


def test_seeded_sampling_repeats_and_differs_by_seed(tiny):
    model, _ = tiny
    prompts = encode(PROMPTS[:2])
    hot = SamplingParams(temperature=1.5, top_p=0.95, seed=7)
    a = generate(model, prompts, 20, sampling=hot).generations
    b = generate(model, prompts, 20, sampling=hot).generations
    c = generate(model, prompts, 20, sampling=SamplingParams(1.5, 0.95, seed=8)).generations
    assert a == b and a != c
    nocache = generate(model, prompts, 20, sampling=hot, use_cache=False).generations
    assert nocache == a


def test_tiny_top_p_is_greedy(tiny):
    model, _ = tiny
    prompts = encode(PROMPTS[:1])
    greedy = generate(model, prompts, 15).generations
    nucleus = generate(model, prompts, 15, sampling=SamplingParams(1.0, 1e-6, 3)).generations
    assert greedy == nucleus


def test_top_p_keeps_the_smallest_nucleus():
    import torch

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    draws = Sampler(SamplingParams(1.0, 0.75, seed=0))
    seen = {draws(logits)[0] for _ in range(300)}
    assert seen == {0, 1}  # 0.5 < 0.75 <= 0.5 + 0.3


@pytest.mark.parametrize("kwargs, message", [
    ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
    ({"prompts": [[]]}, "at least one token"),
    ({"max_new_tokens": 5000}, "past the model's context of 2048"),
])
def test_bad_requests(tiny, kwargs, message):
    model, _ = tiny
    args = {"prompts": [[1, 2, 3]], "max_new_tokens": 4} | kwargs
    with pytest.raises(ValueError, match=message):
        generate(model, **args)


def test_sampling_params_are_checked():
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
