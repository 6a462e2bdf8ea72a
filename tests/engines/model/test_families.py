"""Every family the decoder runs gives transformers' logits (fp32, 1e-4) on a seeded tiny model,
through the recompute path and the paged cache, on prompts past the sliding window."""

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.model.hf_config import model_config_from_hf
from inferlab.engines.model.llama import RUNNABLE_FAMILIES, Llama

from .hf_reference import FAMILY_CONFIGS, SLIDING_WINDOW, hf_model, hf_state_dict

pytest.importorskip("transformers")
TOL = 1e-4
PROMPT = [(7 * i + 3) % 250 + 3 for i in range(3 * SLIDING_WINDOW)]


@pytest.fixture(scope="module", params=[(f, k) for f in sorted(FAMILY_CONFIGS)
                                         for k in ("torch", "native")], ids=str)
def pair(request):
    """(family, transformers model, ours on the torch or the native kernel path)."""
    family, kernels = request.param
    hf, config = hf_model(family)
    cfg = model_config_from_hf(config, id=family)
    ours = Llama.from_state_dict(cfg, hf_state_dict(hf), "fp32", kernels=kernels)
    return family, hf, ours


def test_every_runnable_family_has_a_reference():
    assert set(FAMILY_CONFIGS) == set(RUNNABLE_FAMILIES)


def test_logits_equal_transformers(pair):
    family, hf, ours = pair
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        want = hf(ids[None]).logits[0].float()
    got = ours.forward_nocache(ids, all_logits=True)
    assert (got - want).abs().max() < TOL * max(1.0, want.abs().max())


def test_paged_greedy_equals_transformers(pair):
    family, hf, ours = pair
    ids = list(PROMPT)
    with torch.no_grad():  # transformers' own forward, greedy, no stop token
        for _ in range(12):
            ids.append(int(hf(torch.tensor([ids])).logits[0, -1].argmax()))
    want = ids[len(PROMPT):]
    got = generate(ours, [PROMPT], max_new_tokens=12, block_size=4)
    assert list(got.generations[0].token_ids) == want
