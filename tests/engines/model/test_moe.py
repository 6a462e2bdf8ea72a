"""The MoE block: routing as each family does it, grouped experts equal the per-token loop,
and the tiny MoE model's paged decode equals its full recompute."""

import torch

from inferlab.engines.model import moe
from inferlab.engines.model.generate import generate
from inferlab.engines.model.registry import load_model
from inferlab.engines.model.tiny import tiny_moe_model


def test_grouped_experts_equal_the_per_token_loop():
    model, _ = tiny_moe_model(kernels="torch")
    h = torch.randn(32, 256, generator=torch.Generator().manual_seed(1))
    block = model.layers[0].moe
    grouped = moe.forward_grouped(model.config, block, h)
    per_token = moe.forward_per_token(model.config, block, h)
    assert torch.allclose(grouped, per_token, atol=1e-5)


def test_routing_by_hand():
    """softmax over all experts, top-k, renormalised where the family says."""
    model, _ = tiny_moe_model(kernels="torch")
    cfg, block = model.config, model.layers[1].moe
    h = torch.randn(5, 256, generator=torch.Generator().manual_seed(2))
    weights, ids = moe.route(cfg, block, h)
    probs = torch.softmax(h @ block.router.weight.T, dim=-1)
    top = probs.topk(2, dim=-1)
    assert torch.equal(ids, top.indices)
    assert torch.allclose(weights, top.values / top.values.sum(-1, keepdim=True), atol=1e-6)
    assert moe.experts_touched(ids) == len(set(ids.flatten().tolist()))


def test_tiny_moe_paged_decode_equals_recompute():
    model, tok = load_model("tiny-moe")
    prompt = list(b"Mixture of experts ")
    out = generate(model, [prompt], max_new_tokens=16).generations[0].token_ids
    ids = list(prompt)
    for _ in range(16):
        ids.append(int(model.forward_nocache(torch.tensor(ids))[0].argmax()))
    assert list(out) == ids[len(prompt):]
    assert model.config.n_params_active < model.config.n_params == model.n_params
