"""The MoE block: routing as each family does it, grouped experts equal the per-token loop and
transformers' sparse MoE block (Qwen3-MoE, Mixtral), and the tiny MoE model's paged decode
equals its full recompute."""

import pytest
import torch

from inferlab.engines.model import moe
from inferlab.engines.model.generate import generate
from inferlab.engines.model.hf_config import model_config_from_hf
from inferlab.engines.model.llama import Llama
from inferlab.engines.model.registry import load_model
from inferlab.engines.model.tiny import tiny_moe_model

from .hf_reference import hf_model, hf_state_dict


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


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
@pytest.mark.parametrize("kernels", ["torch", "native"])
def test_grouped_and_per_token_equal_transformers_moe_block(family, kernels):
    """One MoE block on the same hidden states: ours grouped, ours per token and transformers'
    sparse MoE block agree (fp32, 1e-5)."""
    pytest.importorskip("transformers")
    hf, config = hf_model(family)
    ours = Llama.from_state_dict(model_config_from_hf(config, id=family), hf_state_dict(hf),
                                 "fp32", kernels=kernels)
    h = torch.randn(32, ours.config.d_model, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = hf.model.layers[0].mlp(h[None])[0].float()
    block = ours.layers[0].moe
    grouped = moe.forward_grouped(ours.config, block, h)
    per_token = moe.forward_per_token(ours.config, block, h)
    scale = max(1.0, float(want.abs().max()))
    assert float((grouped - want).abs().max()) < 1e-5 * scale
    assert float((per_token - want).abs().max()) < 1e-5 * scale
