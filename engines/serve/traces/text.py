"""Hash ids become TEXT, for a real server: each block id is a fixed block of words, so
requests that share ids share text exactly, and a server's prefix cache sees the trace's own
sharing (content.py does the same with token ids, for InferLab's own engines).

    block_words(id, B)     B word numbers drawn by numpy's Generator seeded by (WORDS_TAG, id)
    prompt of a request    its blocks' words in order, cut at input_tokens words; past the
                           blocks the trace lists, words of its own (seeded by TAIL_TAG and
                           the request's index), shared with nobody
    text                   each word with one space before it: " w1 w2 w3 ..."

Token counts: every word of TRACE_WORDS is ONE token, with its leading space, under SmolLM2's
GPT-2-style BPE (checked with the shipped GGUF's tokenizer: tests/engines/serve/traces/
test_text.py), and that tokenizer's pre-tokenizer splits text at each space before a word, so
no token spans two words: a prompt of n words is exactly n tokens and a block of B words
exactly B tokens; a shared block is a shared run of tokens. Under other byte-level BPEs
(Llama 3, Qwen) these everyday lowercase words are mostly one token too; a word that splits
adds its extra tokens there.

Different ids give different blocks unless all B draws agree (probability 255^-B).
"""

from __future__ import annotations

import functools

import numpy as np

from inferlab.engines.serve.traces.record import TraceRequest

WORDS_TAG = 0x7E47_B10C
"""Mixed into a block id's seed, so a block's words are not its token draw in content.py."""
TAIL_TAG = 0x7E47_7A11
"""Mixed into a request's own seed, so its tail never repeats a block id's draw."""

TRACE_WORDS = tuple("""
a about actually adults after afternoon aged all am among amounts an and are as asking
at autumn avocado avoid away bacterium badly basil before best better between bicycle
bill birthday blankets blue board boil bread buying cactus can capital card cats causes
chain change charging cheap check chicken climate comes compound convert cooking cotton
could counter cover cry day decline desk detective different dinner do does easy eating
egg engine europe explain family far faster first for forms four fresh fridge friendly
friends from games garden gears get give glasses go good groceries guitar have hiking
hours how i if immune in indoors interest is it job keep keeps kids learn learning leave
lemon letter light like little long low make many mask me mean means meeting message
minutes money mortgage most my names need neighbour new nine ninety noise novel of often
old on onions or ordered out overnight pack pair paws people phone plan plants play plot
polite politely puzzles quickly quiet rainbow rainy rate recipe recommend red remove
rice ride ripe routine running rust safe save sentences serves shirt short should simple
sits six sky sleep sleeping slipping so soft some someone spinach split stain start
stays still stop stretch suggest summarize survive system taxi tell than that the their
them there three tip to tonight train trip turning twelve twenty two typical up usual
vaccines very virus want water way ways wear weather week weekly were what when while
white who why wine with without work write years yolk you
""".split())
"""Everyday words from the shipped prompts, each one SmolLM2 token with its leading space."""


@functools.lru_cache(maxsize=65_536)
def block_words(block_id: int, block_size: int) -> tuple[int, ...]:
    """The block_size word numbers (indices into TRACE_WORDS) that block `block_id` stands
    for."""
    rng = np.random.default_rng([WORDS_TAG, block_id])
    return tuple(rng.integers(0, len(TRACE_WORDS), size=block_size).tolist())


def prompt_words(record: TraceRequest, index: int) -> tuple[int, ...]:
    """Request `index`'s prompt as word numbers: its blocks' words cut at input_tokens;
    past its blocks, words of its own (seeded by TAIL_TAG and index)."""
    n, bs = record.input_tokens, record.block_size
    words: list[int] = []
    for block_id in record.block_hashes:
        if len(words) >= n:
            break
        words.extend(block_words(block_id, bs))
    if len(words) < n:
        rng = np.random.default_rng([TAIL_TAG, index])
        words.extend(rng.integers(0, len(TRACE_WORDS), size=n - len(words)).tolist())
    return tuple(words[:n])


def words_text(words: tuple[int, ...]) -> str:
    """The text of word numbers: " w1 w2 ...", each word after one space."""
    return "".join(" " + TRACE_WORDS[i] for i in words)


def prompt_text(record: TraceRequest, index: int) -> str:
    """Request `index`'s prompt text (`prompt_words` as text)."""
    return words_text(prompt_words(record, index))
