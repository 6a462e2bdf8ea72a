"""ShareGPT conversations (ShareGPT_V3_unfiltered_cleaned_split.json), sampled as vLLM's
`bench serve` samples them: a JSON array of {"id": ..., "conversations": [{"from": "human",
"value": "..."}, {"from": "gpt", "value": "..."}, ...]}; a conversation of fewer than two
turns is skipped, the first turn is the prompt and the second turn's length the output, and
a pair is kept only when both are ≥ MIN_TOKENS, the prompt ≤ MAX_PROMPT_TOKENS and the two
together ≤ MAX_TOTAL_TOKENS (vLLM's defaults: 4, 1024, 2048).

Token counts come from the model's own tokenizer when one is given (as vLLM counts them; the
request then carries the prompt's token ids, so the engine runs the conversation's real text),
else they are an estimate: ceil(characters / 4) (`estimate_tokens`, the usual four characters a
token of English text). ShareGPT has no times: every request arrives at 0 (a replay gives it a
rate).

The array is decoded one conversation at a time from a growing text buffer, never whole;
an item that will not decode is a TraceError naming the line it starts on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TextIO

from inferlab.engines.serve.traces.record import TraceError, TraceRequest, shown

MIN_TOKENS, MAX_PROMPT_TOKENS, MAX_TOTAL_TOKENS = 4, 1024, 2048
CHARS_PER_TOKEN = 4
CHUNK_CHARS = 1 << 20
MAX_ITEM_CHARS = 64 << 20


def estimate_tokens(text: str) -> int:
    """ceil(len(text) / CHARS_PER_TOKEN)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def _items(f: TextIO, name: str) -> Iterator[tuple[int, object]]:
    """(line the item starts on, decoded item) for each item of the top-level array."""
    decoder = json.JSONDecoder()
    buf, pos, line, eof = "", 0, 1, False

    def fill() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        more = f.read(max(CHUNK_CHARS, len(buf) - pos))
        eof = not more
        buf, pos = buf[pos:] + more, 0
        return bool(more)

    def skip() -> str:  # the next non-space character ("" at the end of the file)
        nonlocal pos, line
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                line += buf[pos] == "\n"
                pos += 1
            if pos < len(buf):
                return buf[pos]
            if not fill():
                return ""

    first = skip()
    if first == "":
        return
    if first != "[":
        raise TraceError(f"{name} line {line}: expected a JSON array of conversations, "
                         f"got {shown(first)}")
    pos += 1
    index = 0
    while True:
        c = skip()
        if c == "]":
            return
        if c == "" or (index and c != ","):
            raise TraceError(f"{name} line {line}: expected ',' or ']' after item {index - 1}"
                             f", got {shown(c) if c else 'the end of the file'}")
        if index:
            pos += 1
            skip()
        while True:
            try:
                item, end = decoder.raw_decode(buf, pos)
                break
            except RecursionError:
                raise TraceError(f"{name} line {line}: item {index} nested too deeply"
                                 ) from None
            except json.JSONDecodeError as e:
                if len(buf) - pos > MAX_ITEM_CHARS or not fill():
                    raise TraceError(f"{name} line {line}: item {index} is not valid JSON "
                                     f"({e.msg})") from None
            except ValueError as e:  # an integer of thousands of digits
                raise TraceError(f"{name} line {line}: item {index} is not valid JSON "
                                 f"({str(e).split(';')[0]})") from None
        yield line, item
        line += buf.count("\n", pos, end)
        pos = end
        index += 1


def _turn_text(conversation: list, i: int, where: str) -> str:
    turn = conversation[i]
    text = turn.get("value") if isinstance(turn, dict) else None
    if not isinstance(text, str):
        raise TraceError(f"{where}: field 'conversations' item {i} must be an object with a "
                         f"text 'value', got {shown(turn)}")
    return text


def rows(f: TextIO, name: str, tokenizer=None) -> Iterator[tuple[int, TraceRequest]]:
    """(line the conversation starts on, request) for each conversation vLLM would keep;
    `tokenizer` (an `encode(text) -> ids`) counts the tokens, else `estimate_tokens`."""
    for line, item in _items(f, name):
        where = f"{name} line {line}"
        if not isinstance(item, dict):
            raise TraceError(f"{where}: expected a conversation object, got {shown(item)}")
        conversation = item.get("conversations")
        if not isinstance(conversation, list):
            raise TraceError(f"{where}: field 'conversations' must be a list of turns, "
                             f"got {shown(conversation)}")
        if len(conversation) < 2:
            continue
        prompt_text = _turn_text(conversation, 0, where)
        output_text = _turn_text(conversation, 1, where)
        if tokenizer is None:
            ids, prompt, output = None, estimate_tokens(prompt_text), estimate_tokens(output_text)
        else:
            ids = tuple(tokenizer.encode(prompt_text))
            prompt, output = len(ids), len(tokenizer.encode(output_text))
        if (prompt < MIN_TOKENS or output < MIN_TOKENS or prompt > MAX_PROMPT_TOKENS
                or prompt + output > MAX_TOTAL_TOKENS):
            continue
        yield line, TraceRequest(0.0, prompt, output, token_ids=ids)
