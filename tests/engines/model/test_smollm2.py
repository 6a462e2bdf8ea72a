"""SmolLM2-135M-Instruct (the real GGUF) against Hugging Face transformers on the same weights.

Slow: loads the 98 MB GGUF (ours and transformers' loaders) once per session.
"""

import pytest
import torch

from inferlab.engines.model.generate import generate
from inferlab.engines.model.perplexity import passage_text, perplexity

pytestmark = pytest.mark.slow

PROMPT = "The history of the printing press begins in the fifteenth century, when"
TEXTS = [
    "Hello world!",
    "In 1905, Einstein published 4 papers; 12345 + 678 = 13023.",
    "naïve café, Zürich, 日本語, emoji 🙂 and tabs\tand\nnewlines  (two spaces)",
    "<|im_start|>user\nWhat's up?<|im_end|>\n",
    "def f(x):\n    return x ** 2  # a comment",
]


def test_logits_match_transformers(smollm2, hf_smollm2):
    model, tok = smollm2
    hf_model, _ = hf_smollm2
    ids = tok.encode(PROMPT)
    with torch.inference_mode():
        ref = hf_model(torch.tensor([ids])).logits[0].float()
    ours = model.forward_nocache(torch.tensor(ids), all_logits=True)
    assert ours.shape == ref.shape == (len(ids), 49152)
    assert (ours - ref).abs().max().item() < 1e-3


def test_paged_prefill_logits_match_transformers(smollm2, hf_smollm2):
    from inferlab.engines.model.runner import ModelRunner

    model, tok = smollm2
    hf_model, _ = hf_smollm2
    ids = tok.encode(PROMPT)
    runner = ModelRunner(model, max_tokens=64)
    runner.add(0, ids)
    ours = runner.step([0])
    with torch.inference_mode():
        ref = hf_model(torch.tensor([ids])).logits[0, -1:].float()
    assert (ours - ref).abs().max().item() < 1e-3


@pytest.mark.parametrize("text", TEXTS)
def test_tokenizer_matches_transformers(smollm2, hf_smollm2, text):
    _, tok = smollm2
    _, hf_tok = hf_smollm2
    assert tok.encode(text) == hf_tok.encode(text, add_special_tokens=False)
    assert tok.decode(tok.encode(text), skip_special=False) == text


def test_chat_template_matches_transformers(smollm2, hf_smollm2):
    _, tok = smollm2
    _, hf_tok = hf_smollm2
    for messages in ([{"role": "user", "content": "What is 2+2?"}],
                     [{"role": "system", "content": "Answer in French."},
                      {"role": "user", "content": "Hello!"}]):
        text = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert tok.apply_chat(messages) == text
        assert tok.encode(tok.apply_chat(messages)) == hf_tok.encode(text,
                                                                     add_special_tokens=False)
    assert tok.eos_token_ids == (2,)


def test_perplexity_on_the_shipped_passage(smollm2):
    model, tok = smollm2
    result = perplexity(model, tok.encode(passage_text()))
    assert result.n_tokens > 400
    # Measured 28.3 (fp32); a 135M model on plain expository English: 10-60 is sane.
    assert 10 < result.perplexity < 60


def test_greedy_paged_equals_recompute_and_transformers(smollm2, hf_smollm2):
    model, tok = smollm2
    hf_model, _ = hf_smollm2
    ids = tok.encode("The ocean covers most of the Earth, and")  # raw: short recomputes
    paged = generate(model, [ids], max_new_tokens=36, block_size=16).generations[0]
    ref = generate(model, [ids], max_new_tokens=36, use_cache=False).generations[0]
    assert len(paged.token_ids) == 36 and paged.token_ids == ref.token_ids
    with torch.inference_mode():
        out = hf_model.generate(torch.tensor([ids]), max_new_tokens=16, min_new_tokens=16,
                                do_sample=False)
    assert list(paged.token_ids[:16]) == out[0, len(ids):].tolist()


def test_batched_paged_generation_equals_single(smollm2):
    model, tok = smollm2
    prompts = [tok.encode_prompt(p) for p in ("What is the capital of France?",
                                               "Name three colors.")]
    together = generate(model, prompts, max_new_tokens=12).generations
    for p, g in zip(prompts, together, strict=True):
        assert generate(model, [p], max_new_tokens=12).generations[0].token_ids == g.token_ids


def test_greedy_answer_is_coherent(smollm2):
    model, tok = smollm2
    ids = tok.encode_prompt("What is the capital of France?")
    gen = generate(model, [ids], max_new_tokens=24, stop_token_ids=tok.eos_token_ids)
    text = tok.decode(gen.generations[0].token_ids)
    assert "Paris" in text


def test_tiny_hf_folder_matches_transformers(tmp_path, tiny):
    """Untied embeddings and another head layout, through transformers' own Llama."""
    import transformers

    from tests.engines.model.model_files import write_tiny_hf_folder

    folder = write_tiny_hf_folder(tmp_path / "tiny-hf")
    hf_model = transformers.LlamaForCausalLM.from_pretrained(str(folder)).eval()
    ids = list(b"transformers agrees")
    with torch.inference_mode():
        ref = hf_model(torch.tensor([ids])).logits[0]
    ours = tiny[0].forward_nocache(torch.tensor(ids), all_logits=True)
    assert (ours - ref).abs().max().item() < 1e-4
