"""Tokenizers without a model file: bytes, BPE from a vocabulary, chat templates."""

import pytest

from inferlab.engines.model.errors import ModelLoadError
from inferlab.engines.model.tokenizer import (
    ChatTemplate,
    Tokenizer,
    byte_to_unicode,
    chat_template_from_jinja,
)

SMOL_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}")


def test_byte_table_is_a_bijection_onto_printable_characters():
    table = byte_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord("A")] == "A" and table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ"


@pytest.mark.parametrize("text", ["", "hello", "naïve café 日本語 🙂", "\x00\n\t end"])
def test_byte_level_round_trip(text):
    tok = Tokenizer.byte_level()
    assert tok.encode(text) == list(text.encode())
    assert tok.decode(tok.encode(text)) == text
    assert tok.vocab_size == 256


def test_bpe_merges_digits_and_specials():
    table = byte_to_unicode()
    tokens = [table[b] for b in range(256)] + ["Ġt", "he", "Ġthe", "12", "<|im_end|>"]
    merges = ["Ġ t", "h e", "Ġt he", "1 2"]
    gpt2 = Tokenizer.from_bpe(tokens, merges, "gpt2", special_ids=[260])
    smol = Tokenizer.from_bpe(tokens, merges, "smollm", special_ids=[260])
    text = "the 12 theme<|im_end|>"
    assert gpt2.encode(text) == [ord("t"), 257, 32, 259, 258, ord("m"), ord("e"), 260]
    # "smollm" splits every digit before BPE: "12" can no longer merge
    assert smol.encode(text) == [ord("t"), 257, 32, ord("1"), ord("2"), 258, ord("m"),
                                 ord("e"), 260]
    assert gpt2.decode(gpt2.encode(text)) == "the 12 theme"


def test_bpe_refuses_unknown_pre_tokenizer_and_bad_merges():
    tokens = list(byte_to_unicode().values())
    with pytest.raises(ModelLoadError, match="unsupported BPE pre-tokenizer 'qwen2'"):
        Tokenizer.from_bpe(tokens, [], "qwen2")
    with pytest.raises(ModelLoadError, match="bad BPE merge 'abc'"):
        Tokenizer.from_bpe(tokens, ["abc"], "gpt2")


def test_chatml_detected_with_its_default_system_prompt():
    t = chat_template_from_jinja(SMOL_TEMPLATE)
    assert t == ChatTemplate("chatml", "You are a helpful AI assistant named SmolLM, trained "
                                       "by Hugging Face")
    assert t.render([{"role": "user", "content": "hi"}]) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    own = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"}]
    assert t.render(own, add_generation_prompt=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n")


def test_unknown_templates_are_not_guessed():
    assert chat_template_from_jinja(None) is None
    assert chat_template_from_jinja("{{ bos_token }}[INST] {{ m }} [/INST]") is None
    tok = Tokenizer.byte_level()
    with pytest.raises(ValueError, match="no chat template"):
        tok.apply_chat("hi")
    assert tok.encode_prompt("hi") == [104, 105]  # no template: raw
