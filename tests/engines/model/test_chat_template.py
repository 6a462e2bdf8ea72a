"""Chat templates rendered in the sandbox give transformers' text, and fail with a clear error.

The reference is transformers' own `apply_chat_template` (a `PreTrainedTokenizerFast` holding
only the template and the BOS/EOS strings). Gemma 3's template is not in the shipped GGUF: it
is the one in google/gemma-3-270m's tokenizer_config.json, copied below as test data.
"""

from __future__ import annotations

import pytest

from inferlab.engines.model import chat_template as chat_template_module
from inferlab.engines.model.chat_template import (
    ChatTemplateError,
    JinjaChatTemplate,
    load_chat_template,
)
from inferlab.engines.model.tokenizer import Tokenizer, byte_to_unicode, chat_template_from_jinja

GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""

# What the sandbox's extras and Jinja's whitespace options do, each used once.
FEATURES_TEMPLATE = """{%- set ns = namespace(n=0) %}
{% for m in messages %}
    {% if m.role == 'tool' %}{% continue %}{% endif %}
    {% set ns.n = ns.n + 1 %}
  [{{ loop.index }}] {{ m.role | upper }}: {{ m.content | trim }}
    {% if m.meta is defined %}
{{ m.meta | tojson(indent=2, sort_keys=true) }}
{{ m.meta | tojson(separators=(',', ':')) }}
    {% endif %}
    {% if ns.n >= 3 %}{% break %}{% endif %}
{% endfor %}
{{ ns.n }} {{ messages[1:] | length }} {{ strftime_now('%Y') | length }}
{% if add_generation_prompt %}{{ bos_token }}>{{ eos_token }}{% endif %}"""

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hello!"}],
    [{"role": "user", "content": "  naïve café 日本語 🙂 {{ not_a_variable }} {% raw %}  "},
     {"role": "assistant", "content": "ok\n\n"},
     {"role": "user", "content": "<start_of_turn> and <|im_end|> as text"}],
]


def transformers_render(source, messages, add_generation_prompt=True, bos="<bos>",
                        eos="<eos>"):
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.byte_level().backend,
                                 bos_token=bos, eos_token=eos)
    hf.chat_template = source
    return hf.apply_chat_template(messages, tokenize=False,
                                  add_generation_prompt=add_generation_prompt)


@pytest.fixture(scope="module")
def smollm2_template(smollm2_path):
    from inferlab.engines.model.gguf_file import GGUFFile

    return GGUFFile(smollm2_path).require("tokenizer.chat_template", str)


@pytest.mark.parametrize("generation", [True, False])
@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_smollm2_template_renders_as_transformers_and_as_before(smollm2_template, messages,
                                                                 generation):
    ours = load_chat_template(smollm2_template, "<|im_start|>", "<|im_end|>")
    assert ours.kind == "chatml"
    text = ours.render(messages, generation)
    assert text == transformers_render(smollm2_template, messages, generation,
                                       "<|im_start|>", "<|im_end|>")
    # the ChatML recogniser SmolLM2's prompts were built with until now: the same text
    assert text == chat_template_from_jinja(smollm2_template).render(messages, generation)


@pytest.mark.parametrize("generation", [True, False])
@pytest.mark.parametrize("messages", [
    *CONVERSATIONS,
    [{"role": "system", "content": [{"type": "text", "text": " Be brief. "}]},
     {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]}],
])
def test_gemma3_template_renders_as_transformers(messages, generation):
    ours = load_chat_template(GEMMA3_TEMPLATE, "<bos>", "<eos>")
    assert ours.kind == "gemma"
    assert ours.render(messages, generation) == transformers_render(GEMMA3_TEMPLATE, messages,
                                                                    generation)


def test_template_refusal_is_a_chat_template_error_as_in_transformers():
    import jinja2

    two_users = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(jinja2.TemplateError, match="must alternate"):
        transformers_render(GEMMA3_TEMPLATE, two_users)
    with pytest.raises(ChatTemplateError, match=r"refused the conversation at line 19: "
                                                r"Conversation roles must alternate"):
        load_chat_template(GEMMA3_TEMPLATE).render(two_users)


@pytest.mark.parametrize("generation", [True, False])
def test_sandbox_extras_and_whitespace_as_transformers(generation):
    messages = [{"role": "system", "content": " sys "},
                {"role": "tool", "content": "skipped"},
                {"role": "user", "content": "é", "meta": {"b": [1, 2], "a": "ü<&>"}},
                {"role": "assistant", "content": "x"},
                {"role": "user", "content": "never reached"}]
    ours = load_chat_template(FEATURES_TEMPLATE, "<s>", "</s>").render(messages, generation)
    assert ours == transformers_render(FEATURES_TEMPLATE, messages, generation, "<s>", "</s>")
    assert '"a": "ü<&>"' in ours  # tojson keeps the text as it is


@pytest.mark.parametrize(("source", "error"), [
    ("{% for m in messages %}{{ m.content }}", r"does not compile \(line 1: Unexpected end"),
    ("line one\n{{ raise_exception('no ' + messages[0].role) }}",
     r"refused the conversation at line 2: no user"),
    ("{{ messages[0].content + 1 }}", r"failed at line 1 \(TypeError: "),
    ("\n\n{{ 1 / 0 }}", r"failed at line 3 \(ZeroDivisionError"),
    ("{{ missing.attribute }}", r"UndefinedError: 'missing' is undefined"),
    ("{{ messages.append(1) }}", r"SecurityError: access to attribute 'append'"),
    ("{{ 'ab' * 100000000 }}", r"SecurityError: repetition of 2 items"),
    ("{% set n = 10 %}{{ n ** 100000 }}", r"SecurityError: power 10 \*\* 100000 is too large"),
])
def test_bad_templates_fail_with_a_clear_error(source, error):
    template = load_chat_template(source)  # loading never fails: the model stays usable raw
    with pytest.raises(ChatTemplateError, match=error):
        template.render([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("source", ["{{ messages.__class__ }}", "{{ ''.__class__.__mro__ }}",
                                    "{{ strftime_now.__globals__ }}",
                                    "{{ messages.__class__.__subclasses__() }}"])
def test_private_attributes_stay_hidden(source):
    """The sandbox answers an unsafe attribute with an undefined value: it prints as nothing,
    and going further raises SecurityError."""
    try:
        assert load_chat_template(source).render([{"role": "user", "content": "hi"}]) == ""
    except ChatTemplateError as e:
        assert "SecurityError: access to attribute '__" in str(e)


def test_output_is_bounded(monkeypatch):
    monkeypatch.setattr(chat_template_module, "MAX_OUTPUT_CHARS", 1000)
    template = load_chat_template("{% for i in range(100) %}{{ 'x' * 20 }}{% endfor %}")
    with pytest.raises(ChatTemplateError, match="wrote more than 1,000 characters"):
        template.render([])


def test_messages_must_be_mappings():
    template = load_chat_template("{{ messages }}")
    for bad in ("hi", [["user", "hi"]], [None]):
        with pytest.raises(ChatTemplateError, match="list of"):
            template.render(bad)


def test_no_template():
    assert load_chat_template(None) is None and load_chat_template(" \n") is None


def bpe_with_bos(template: JinjaChatTemplate | None, add_bos: bool) -> Tokenizer:
    table = byte_to_unicode()
    tokens = [table[b] for b in range(256)] + ["<bos>", "<eos>"]
    return Tokenizer.from_bpe(tokens, [], "gpt2", special_ids=[256, 257], eos_token_ids=[257],
                              bos_token_id=256, add_bos=add_bos, chat_template=template)


def test_encode_chat_writes_bos_once():
    template = load_chat_template(GEMMA3_TEMPLATE, "<bos>", "<eos>")
    text = template.render([{"role": "user", "content": "hi"}])
    assert text.startswith("<bos><start_of_turn>user\nhi<end_of_turn>\n")
    adds = bpe_with_bos(template, add_bos=True)
    assert adds.apply_chat("hi") == text  # the template's text, as transformers gives it
    ids = adds.encode_chat("hi")
    assert ids[:2] == [256, ord("<")] and ids.count(256) == 1
    assert adds.encode_prompt("hi") == ids
    assert bpe_with_bos(template, add_bos=False).encode_chat("hi") == ids
    assert adds.encode_prompt("hi", chat=False) == [256, ord("h"), ord("i")]
