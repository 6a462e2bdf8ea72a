"""Every family loaded from files as a user would: the Hugging Face folder (safetensors,
tokenizer.json) and the GGUF llama.cpp's converter writes, each through `load_model`, gives
transformers' logits (fp32, 1e-4); a Q8_0 file held as its codes agrees with its fp32 expansion."""

import pytest
import torch

from inferlab.engines.model.registry import load_model

from .family_models import FAMILIES, family_files, family_q8_0_files  # noqa: F401 (fixtures)

pytest.importorskip("transformers")
PROMPT = [(11 * i + 5) % 250 + 3 for i in range(16)]  # within Mistral's window (the GGUF loses it)


@pytest.fixture(scope="module")
def references(family_files):  # noqa: F811
    from transformers import AutoModelForCausalLM

    out = {}
    for mt, (hf_dir, _) in family_files.items():
        hf = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32,
                                                  attn_implementation="eager").eval()
        with torch.no_grad():
            out[mt] = hf(torch.tensor([PROMPT])).logits[0].float()
    return out


def close(got: torch.Tensor, want: torch.Tensor) -> bool:
    return bool((got - want).abs().max() < 1e-4 * max(1.0, float(want.abs().max())))


@pytest.mark.parametrize("family", FAMILIES)
def test_folder_and_gguf_give_transformers_logits(family, family_files, references):  # noqa: F811
    hf_dir, gguf = family_files[family]
    for path in (hf_dir, gguf):
        model, tok = load_model(str(path), kernels="torch")
        assert model.config.family == family
        assert close(model.forward_nocache(torch.tensor(PROMPT), all_logits=True),
                     references[family]), path


@pytest.mark.parametrize("family", ["llama", "qwen3_moe"])
def test_q8_0_codes_agree_with_their_fp32_expansion(family, family_q8_0_files):  # noqa: F811
    path = str(family_q8_0_files[family])
    codes, _ = load_model(path, weights="codes")
    fp32, _ = load_model(path, weights="fp32")
    ids = torch.tensor(PROMPT)
    a, b = fp32.forward_nocache(ids, all_logits=True), codes.forward_nocache(ids, all_logits=True)
    assert torch.equal(a.argmax(-1), b.argmax(-1)) and close(b, a)
    assert codes.weight_bytes < fp32.weight_bytes
