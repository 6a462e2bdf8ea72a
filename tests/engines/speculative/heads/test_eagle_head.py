"""The EAGLE head's layer: run one pair at a time through its cache, or all at once
causally, it gives the same outputs; padding after a window changes nothing before it."""

from __future__ import annotations

import torch

from inferlab.engines.speculative.heads.dims import HeadDims, constant_dims
from inferlab.engines.speculative.heads.eagle import EagleHead, HeadCache
from inferlab.engines.speculative.heads.medusa import MedusaHeads


def _random_head(tiny, seed=3):
    head = EagleHead(HeadDims.of(tiny[0], "eagle"), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # o and down start at zero: give them weights so attention matters
        for p in head.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return head.eval()


def test_cached_steps_equal_the_causal_forward(tiny):
    head = _random_head(tiny)
    d = head.dims.d_model
    gen = torch.Generator().manual_seed(0)
    feats, embeds = torch.randn(1, 9, d, generator=gen), torch.randn(1, 9, d, generator=gen)
    with torch.no_grad():
        whole = head(feats, embeds)[0]
        cache = HeadCache(head.dims, 16)
        first = head(feats[:, :4], embeds[:, :4], 0, cache)[0]  # a multi-row catch-up
        rest = [head(feats[:, i:i + 1], embeds[:, i:i + 1], i, cache)[0, 0] for i in range(4, 9)]
    assert cache.length == 9
    torch.testing.assert_close(torch.cat([first, torch.stack(rest)]), whole, rtol=1e-5, atol=1e-5)
    # rolled back to 6 and rerun: the same rows again
    cache.truncate(6)
    with torch.no_grad():
        again = head(feats[:, 6:], embeds[:, 6:], 6, cache)[0]
    torch.testing.assert_close(again, whole[6:], rtol=1e-5, atol=1e-5)


def test_attention_reads_the_past(tiny):
    """A different first pair changes later outputs (the layer attends; not a per-row MLP)."""
    head = _random_head(tiny)
    gen = torch.Generator().manual_seed(1)
    feats = torch.randn(1, 5, head.dims.d_model, generator=gen)
    embeds = torch.randn(1, 5, head.dims.d_model, generator=gen)
    other = feats.clone()
    other[0, 0] += 1.0
    with torch.no_grad():
        assert not torch.allclose(head(feats, embeds)[0, 4], head(other, embeds)[0, 4])


def test_padding_after_the_window_changes_nothing(tiny):
    head = _random_head(tiny)
    gen = torch.Generator().manual_seed(2)
    feats = torch.randn(1, 6, head.dims.d_model, generator=gen)
    embeds = torch.randn(1, 6, head.dims.d_model, generator=gen)
    padded_f = torch.cat([feats, torch.zeros(1, 3, head.dims.d_model)], dim=1)
    padded_e = torch.cat([embeds, torch.zeros(1, 3, head.dims.d_model)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(head(padded_f, padded_e)[0, :6], head(feats, embeds)[0])


def test_medusa_starts_as_the_identity(tiny):
    """W_k, b_k zero: h_k = f + SiLU(0) = f, so every head starts as the target's own head."""
    heads = MedusaHeads(HeadDims.of(tiny[0], "medusa", n_medusa=3))
    f = torch.randn(4, heads.dims.d_model)
    with torch.no_grad():
        out = heads(f)
    assert out.shape == (3, 4, heads.dims.d_model)
    assert torch.equal(out, f.expand(3, 4, -1))


def test_second_step_training_equals_drafting_through_the_cache(tiny):
    """forward_step2 at position p = what drafting computes for its second token: the real
    pairs 0 .. p - 1 in the cache, then the draft pair (f̂_p, x_{p+1}) at position p."""
    head = _random_head(tiny)
    d = head.dims.d_model
    gen = torch.Generator().manual_seed(5)
    feats, embeds = torch.randn(2, 7, d, generator=gen), torch.randn(2, 7, d, generator=gen)
    feats2 = torch.randn(2, 7, d, generator=gen)
    with torch.no_grad():
        trained = head.forward_step2(feats, embeds, feats2, embeds)
        for b in range(2):
            for p in range(7):
                cache = HeadCache(head.dims, 8)
                if p:
                    head(feats[b:b + 1, :p], embeds[b:b + 1, :p], 0, cache)
                drafted = head(feats2[b:b + 1, p:p + 1], embeds[b:b + 1, p:p + 1], p, cache)
                torch.testing.assert_close(trained[b, p], drafted[0, 0], rtol=1e-4, atol=1e-4)
    # and it differs from the causal forward on the second-step pairs (own keys only)
    with torch.no_grad():
        assert not torch.allclose(trained, head(feats2, embeds), atol=1e-3)


def test_constant_dims_by_hand():
    # dim 0: 10 ± 0.5 (massive, constant: held); dim 1: 10 ± 5 (massive, varies); dim 2: 1 ± 0
    # (constant, not massive); dim 3: -8 exactly (held, with its sign)
    rows = torch.tensor([[9.5, 5.0, 1.0, -8.0], [10.5, 15.0, 1.0, -8.0]])
    mask, value = constant_dims([rows[:1], rows[1:]])  # row blocks, summed block by block
    assert mask.tolist() == [True, False, False, True]
    assert value.tolist() == [10.0, 0.0, 0.0, -8.0]


def test_held_dims_are_output_as_their_value_everywhere(tiny):
    """Whatever the layer computes, a held dimension comes out as its value: the plain, the
    cached, the tree and the second-step forwards."""
    head = _random_head(tiny)
    d = head.dims.d_model
    with torch.no_grad():
        head.constant_mask[[1, 5]] = True
        head.constant_value[[1, 5]] = torch.tensor([23.0, -4.0])
    gen = torch.Generator().manual_seed(1)
    feats, embeds = torch.randn(1, 6, d, generator=gen), torch.randn(1, 6, d, generator=gen)
    free = _random_head(tiny)  # the same weights, nothing held
    with torch.no_grad():
        outs = [head(feats, embeds)[0],
                head(feats, embeds, 0, HeadCache(head.dims, 8))[0],
                head.forward_step2(feats, embeds, feats, embeds)[0]]
        reference = free(feats, embeds)[0]
    for out in outs:
        assert torch.equal(out[:, 1], torch.full((6,), 23.0))
        assert torch.equal(out[:, 5], torch.full((6,), -4.0))
    keep = [i for i in range(d) if i not in (1, 5)]
    assert torch.equal(outs[0][:, keep], reference[:, keep])


def test_drafting_copies_give_the_same_outputs_until_trained_again(tiny):
    """`for_drafting` multiplies by native copies of the weights: the plain, cached and tree
    forwards match nn.Linear's; with gradients on (training) nn.Linear runs and gradients
    reach the weights; `train()` drops the copies, so a changed weight is read again."""
    head = _random_head(tiny)
    d = head.dims.d_model
    gen = torch.Generator().manual_seed(4)
    feats, embeds = torch.randn(1, 7, d, generator=gen), torch.randn(1, 7, d, generator=gen)

    def outputs():
        with torch.no_grad():
            cache = HeadCache(head.dims, 16)
            cached = head(feats[:, :5], embeds[:, :5], 0, cache)[0]
            tree, _, _ = head.forward_tree(
                feats[0, 5:], embeds[0, 5:], torch.tensor([5, 5]), cache,
                torch.zeros(0, head.dims.n_kv_heads, head.dims.d_head),
                torch.zeros(0, head.dims.n_kv_heads, head.dims.d_head),
                torch.zeros(2, 0, dtype=torch.bool))
            return head(feats, embeds)[0], cached, tree

    reference = outputs()
    assert head.for_drafting() is head and not head.training
    for got, want in zip(outputs(), reference, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    head(feats, embeds).sum().backward()  # gradients on: nn.Linear, and they reach it
    assert head.gate_up.weight.grad is not None and bool(head.gate_up.weight.grad.any())
    with torch.no_grad():
        head.down.weight.mul_(2.0)
    stale = outputs()[0]
    head.train()
    head.eval()
    fresh = outputs()[0]
    assert not torch.allclose(stale, fresh)
    with torch.no_grad():
        torch.testing.assert_close(fresh, head.for_drafting()(feats, embeds)[0], rtol=1e-5,
                                   atol=1e-5)
