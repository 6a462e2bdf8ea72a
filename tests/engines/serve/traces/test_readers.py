"""Each published format's reader on hand-written samples: header variants, a bad row named by
line and field, an empty file, a huge number, a timestamp that goes backwards."""

from __future__ import annotations

import json

import pytest

from inferlab.engines.serve.traces.detect import detect_format
from inferlab.engines.serve.traces.record import TraceError, TraceRequest
from inferlab.engines.serve.traces.stream import read_trace, trace_format


def read(tmp_path, text: str, fmt=None, name="t.txt", **kw) -> list[TraceRequest]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return list(read_trace(path, fmt, **kw))


def refused(tmp_path, text: str, message: str, fmt=None, **kw) -> None:
    with pytest.raises(TraceError) as err:
        read(tmp_path, text, fmt, **kw)
    assert message in str(err.value)
    assert isinstance(err.value, ValueError)


# ---- Mooncake --------------------------------------------------------------------------------

MOONCAKE = (
    '{"timestamp": 1000, "input_length": 1100, "output_length": 20, "hash_ids": [0, 1, 2]}\n'
    '\n'
    '{"timestamp": 1500, "input_length": 512, "output_length": 7, "hash_ids": [0]}\n'
    '{"hash_ids": [], "output_length": 1, "input_length": 3, "timestamp": 1500, "x": 1}\n')


def test_mooncake_milliseconds_lengths_and_512_token_blocks(tmp_path):
    got = read(tmp_path, MOONCAKE)
    assert got == [TraceRequest(0.0, 1100, 20, (0, 1, 2), 512),
                   TraceRequest(0.5, 512, 7, (0,), 512),
                   TraceRequest(0.5, 3, 1, (), 0)]


@pytest.mark.parametrize("line, message", [
    ('{"timestamp": 5, "input_length": -1, "output_length": 1}',
     "t.txt line 2: field 'input_length' must be in 0..10,000,000, got -1"),
    ('{"timestamp": 5, "input_length": 10000000000000000000000, "output_length": 1}',
     "t.txt line 2: field 'input_length' must be in 0..10,000,000"),
    ('{"timestamp": 5, "input_length": 1.5, "output_length": 1}',
     "line 2: field 'input_length' must be an integer token count, got 1.5"),
    ('{"timestamp": 5, "input_length": 1}', "line 2: missing field 'output_length'"),
    ('{"timestamp": 1e999, "input_length": 1, "output_length": 1}',
     "line 2: field 'timestamp' must be a finite time"),
    ('{"timestamp": "5", "input_length": 1, "output_length": 1}',
     "line 2: field 'timestamp' must be a number, got '5'"),
    ('{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [1, -2]}',
     "line 2: field 'hash_ids' item 1 must be a block id in 0..2**63-1, got -2"),
    ('{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [true]}',
     "field 'hash_ids' item 0 must be a block id"),
    ('{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": 3}',
     "field 'hash_ids' must be a list of block ids, got 3"),
    ('{"timestamp": 5, "input_length": ', "line 2: not valid JSON at column"),
    ('{"timestamp": NaN, "input_length": 1, "output_length": 1}', "line 2: not valid JSON"),
    ('[1]', "line 2: expected a JSON object, got list"),
])
def test_mooncake_bad_rows_name_line_and_field(tmp_path, line, message):
    first = '{"timestamp": 0, "input_length": 1, "output_length": 1}\n'
    refused(tmp_path, first + line + "\n", message)


def test_mooncake_timestamp_going_backwards_is_refused_by_line(tmp_path):
    text = ('{"timestamp": 2000, "input_length": 1, "output_length": 1}\n'
            '{"timestamp": 1999, "input_length": 1, "output_length": 1}\n')
    refused(tmp_path, text, "t.txt line 2: field 'timestamp' goes back in time (1.999 s "
                            "after 2 s")


# ---- Bailian -----------------------------------------------------------------------------------

BAILIAN = "\n".join(json.dumps(o) for o in [
    {"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 521,
     "output_length": 132, "type": "text", "turn": 1, "hash_ids": [1089, 1090]},
    {"chat_id": 160, "parent_chat_id": 159, "timestamp": 62.5, "input_length": 40,
     "output_length": 80, "type": "text", "turn": 2, "hash_ids": [1089, 5]},
    {"chat_id": 161, "parent_chat_id": 160, "timestamp": 62.5, "input_length": 9,
     "output_length": 1, "type": "search", "turn": 3, "hash_ids": []},
    {"chat_id": 7, "parent_chat_id": 3, "timestamp": 70, "input_length": 1,
     "output_length": 1, "hash_ids": [9]},
    {"chat_id": 8, "timestamp": 71, "input_length": 2, "output_length": 2},
]) + "\n"


def test_bailian_sessions_turns_seconds_and_16_token_blocks(tmp_path):
    got = read(tmp_path, BAILIAN)
    assert trace_format(tmp_path / "t.txt") == "bailian"
    assert [r.session for r in got] == [159, 159, 159, 3, 8]  # root chat, parent, itself
    assert [r.turn for r in got] == [1, 2, 3, 1, 1]
    assert got[0] == TraceRequest(0.0, 521, 132, (1089, 1090), 16, 159, 1)
    assert got[1].arrival_s == pytest.approx(1.386)
    assert got[2].block_hashes == () and got[2].block_size == 0
    assert got[3].arrival_s == pytest.approx(70 - 61.114)


@pytest.mark.parametrize("row, message", [
    ({"chat_id": -5, "timestamp": 80, "input_length": 1, "output_length": 1},
     "line 6: field 'chat_id' must be an integer id ≥ 0, got -5"),
    ({"chat_id": 9, "parent_chat_id": "a", "timestamp": 80, "input_length": 1,
      "output_length": 1}, "line 6: field 'parent_chat_id' must be an integer id ≥ -1"),
    ({"chat_id": 9, "turn": 0, "timestamp": 80, "input_length": 1, "output_length": 1},
     "line 6: field 'turn' must be an integer ≥ 1, got 0"),
    ({"chat_id": 9, "timestamp": 80, "input_length": 1, "output_length": 2**70},
     "line 6: field 'output_length' must be in 0..10,000,000"),
    ({"chat_id": 9, "timestamp": 60, "input_length": 1, "output_length": 1},
     "line 6: field 'timestamp' goes back in time"),
])
def test_bailian_bad_rows(tmp_path, row, message):
    refused(tmp_path, BAILIAN + json.dumps(row) + "\n", message)


# ---- Azure -------------------------------------------------------------------------------------

AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,4808,10\n"
         "2023-11-16 18:15:50.9951690,3180,8\n"
         "2023-11-16 23:59:59.9999999,1,1\n"
         "2023-11-17 00:00:00.0000001,2,2\n")


def test_azure_absolute_times_become_exact_offsets(tmp_path):
    got = read(tmp_path, AZURE)
    assert [(r.input_tokens, r.output_tokens) for r in got] == [(4808, 10), (3180, 8),
                                                                (1, 1), (2, 2)]
    assert got[0].arrival_s == 0.0
    assert got[1].arrival_s == pytest.approx(4.314579, abs=1e-9)
    # across midnight: 5 h 44 min 13.3194099 s, then 0.0000002 s later
    assert got[2].arrival_s == pytest.approx(5 * 3600 + 44 * 60 + 13.3194099, abs=1e-9)
    assert got[3].arrival_s - got[2].arrival_s == pytest.approx(2e-7, abs=1e-9)


@pytest.mark.parametrize("header, row", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens", "2024-05-10 00:00:00.0099300,5,6"),
    ("\ufeffTIMESTAMP , contexttokens,GENERATEDTOKENS", "2024-05-10 00:00:00.00993,5,6"),
    ("GeneratedTokens,extra,TIMESTAMP,ContextTokens", "6,x,2024-05-10T00:00:00.00993,5"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens", "2024-05-10 02:00:00.00993+02:00,5,6"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens", "2024-05-10 00:00:00.00993Z,5,6"),
])
def test_azure_header_variants_and_time_spellings(tmp_path, header, row):
    text = f"{header}\n2024-05-10 00:00:00.0000000,1,1\n{row}\n".replace(
        "2024-05-10 00:00:00.0000000,1,1", ",".join(
            {"TIMESTAMP": "2024-05-10 00:00:00.0000000", "ContextTokens": "1",
             "GeneratedTokens": "1", "extra": "y"}[c.strip().lstrip("\ufeff").upper()
                                                   if c.strip().lstrip("\ufeff").upper()
                                                   == "TIMESTAMP" else
                                                   {"contexttokens": "ContextTokens",
                                                    "generatedtokens": "GeneratedTokens",
                                                    "extra": "extra"}[c.strip().lower()]]
            for c in header.split(",")))
    got = read(tmp_path, text)
    assert trace_format(tmp_path / "t.txt") == "azure"
    assert got[1].input_tokens == 5 and got[1].output_tokens == 6
    assert got[1].arrival_s == pytest.approx(0.00993, abs=1e-9)


@pytest.mark.parametrize("row, message", [
    ("2023-11-16 18:15:47.1,x,3", "t.txt line 3: field 'ContextTokens' must be an integer "
                                  "token count, got 'x'"),
    ("2023-11-16 18:15:47.1,4,99999999999999999999999", "line 3: field 'GeneratedTokens' "
                                                         "must be in 0..10,000,000"),
    ("2023-11-16 18:15:47.1,4,-1", "line 3: field 'GeneratedTokens' must be in"),
    ("2023-11-16 25:15:47.1,4,1", "line 3: field 'TIMESTAMP' must be a time"),
    ("2023-02-30 18:15:47.1,4,1", "line 3: field 'TIMESTAMP' must be a time"),
    ("yesterday,4,1", "line 3: field 'TIMESTAMP' must be a time"),
    ("2023-11-16 18:15:47.1,4", "line 3: 2 cells, the header names 3"),
    ("2023-11-16 18:15:46.6805899,1,1", "line 3: field 'TIMESTAMP' goes back in time"),
])
def test_azure_bad_rows(tmp_path, row, message):
    refused(tmp_path, AZURE.splitlines(keepends=True)[0] + AZURE.splitlines()[1] + "\n" + row
            + "\n", message)


def test_a_header_without_a_needed_column_is_named(tmp_path):
    refused(tmp_path, "TIMESTAMP,ContextTokens,Other\n2023-11-16 18:15:46.1,1,1\n",
            "header has no column 'GeneratedTokens'", fmt="azure")


# ---- BurstGPT ----------------------------------------------------------------------------------

BURST = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
         "5,ChatGPT,472,18,490,Conversation log\n"
         "45,ChatGPT,1087,0,1087,API log\n"
         "118,GPT-4,417,276,693,Conversation log\n"
         "118.5,GPT-4,20,3,23,API log\n")


def test_burstgpt_rows_and_its_filters(tmp_path):
    got = read(tmp_path, BURST)
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in got] == [
        (0, 472, 18), (40, 1087, 0), (113, 417, 276), (113.5, 20, 3)]
    gpt4 = read(tmp_path, BURST, models={"GPT-4"})
    # times count from the first row kept
    assert [(r.arrival_s, r.input_tokens) for r in gpt4] == [(0, 417), (0.5, 20)]
    conv = read(tmp_path, BURST, log_types={"Conversation log"}, models={"GPT-4"})
    assert [r.input_tokens for r in conv] == [417]


def test_burstgpt_header_variant(tmp_path):
    text = ("log type , TIMESTAMP,model,request tokens,response tokens,total tokens\n"
            "API log,3.5,ChatGPT,1,2,3\n")
    assert read(tmp_path, text) == [TraceRequest(0.0, 1, 2)]


@pytest.mark.parametrize("row, message", [
    ("50,ChatGPT,x,1,1,API log", "line 3: field 'Request tokens' must be an integer"),
    ("50,ChatGPT,1,1,-4,API log", "line 3: field 'Total tokens' must be in"),
    ("inf,ChatGPT,1,1,1,API log", "line 3: field 'Timestamp' must be a finite time"),
    ("1e300,ChatGPT,1,1,1,API log", "line 3: field 'Timestamp' must be a finite time"),
    ("4,ChatGPT,1,1,1,API log", "line 3: field 'Timestamp' goes back in time (4 s after 5 s"),
])
def test_burstgpt_bad_rows(tmp_path, row, message):
    refused(tmp_path, "\n".join(BURST.splitlines()[:2]) + "\n" + row + "\n", message)


# ---- ShareGPT ---------------------------------------------------------------------------------

def test_sharegpt_first_turn_prompt_second_turn_output_and_vllms_filters(tmp_path):
    convs = [
        {"id": "a", "conversations": [{"from": "human", "value": "x" * 40},
                                      {"from": "gpt", "value": "y" * 81}, {"from": "human",
                                                                           "value": "z"}]},
        {"id": "b", "conversations": [{"from": "human", "value": "only one"}]},
        {"id": "c", "conversations": [{"from": "human", "value": "abc"},  # 1 token: < 4
                                      {"from": "gpt", "value": "y" * 80}]},
        {"id": "d", "conversations": [{"from": "human", "value": "x" * 4097},  # 1025 > 1024
                                      {"from": "gpt", "value": "y" * 80}]},
        {"id": "e", "conversations": [{"from": "human", "value": "x" * 4096},  # 1024 + 1025
                                      {"from": "gpt", "value": "y" * 4100}]},
        {"id": "f", "conversations": [{"from": "human", "value": "x" * 4096},  # 1024 + 1024
                                      {"from": "gpt", "value": "y" * 4096}]},
    ]
    text = "[\n" + ",\n".join(json.dumps(c) for c in convs) + "\n]\n"
    got = read(tmp_path, text)
    assert trace_format(tmp_path / "t.txt") == "sharegpt"
    assert got == [TraceRequest(0.0, 10, 21), TraceRequest(0.0, 1024, 1024)]


@pytest.mark.parametrize("text, message", [
    ('[{"conversations": 3}]', "t.txt line 1: field 'conversations' must be a list"),
    ('[\n{"conversations": []},\n 7]', "t.txt line 3: expected a conversation object, got 7"),
    ('[{"conversations": [{"value": 1}, {"value": "x"}]}]',
     "field 'conversations' item 0 must be an object with a text 'value'"),
    ('[{"conversations": []} {"conversations": []}]', "expected ',' or ']' after item 0"),
    ('[{"conversations": [', "line 1: item 0 is not valid JSON"),
    ('[{"conversations": []},', "line 1: item 1 is not valid JSON"),
    ('[{"conversations": []}', "expected ',' or ']' after item 0, got the end of the file"),
])
def test_sharegpt_bad_items(tmp_path, text, message):
    refused(tmp_path, text, message, fmt="sharegpt")


# ---- InferLab JSONL, detection, empty files ----------------------------------------------------

def test_inferlab_jsonl_through_workload_py_parser(tmp_path):
    text = ('{"arrival_s": 0.5, "prompt_tokens": 4, "output_tokens": 2}\n'
            '{"arrival_s": 1.5, "prompt_token_ids": [5, 6], "output_tokens": 1}\n')
    got = read(tmp_path, text)
    assert got == [TraceRequest(0.0, 4, 2), TraceRequest(1.0, 2, 1, token_ids=(5, 6))]
    refused(tmp_path, text + '{"arrival_s": 2, "prompt_tokens": 0, "output_tokens": 1}\n',
            "t.txt line 3: field 'prompt_tokens' must be an integer ≥ 1")


@pytest.mark.parametrize("fmt", ["mooncake", "bailian", "azure", "burstgpt", "sharegpt",
                                 "inferlab", None])
@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_file_holds_no_request(tmp_path, fmt, text):
    assert read(tmp_path, text, fmt) == []


@pytest.mark.parametrize("line, fmt", [
    ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}', "mooncake"),
    ('{"chat_id": 1, "timestamp": 0}', "bailian"),
    ('{"arrival_s": 0}', "inferlab"),
    ('[', "sharegpt"),
    ('TIMESTAMP,ContextTokens,GeneratedTokens', "azure"),
    ('Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type', "burstgpt"),
])
def test_the_format_is_recognised_from_the_first_line(line, fmt):
    assert detect_format(line, "f") == fmt


@pytest.mark.parametrize("line", ['{"a": 1}', "a,b,c", "{not json", "hello"])
def test_an_unknown_first_line_asks_for_the_format(line):
    with pytest.raises(TraceError, match="f line 1: cannot tell the trace's format"):
        detect_format(line, "f")


def test_the_format_can_be_named_over_the_first_line(tmp_path):
    # a Mooncake-looking file read as Bailian: its missing chat_id is then the error
    refused(tmp_path, MOONCAKE, "line 1: missing field 'chat_id'", fmt="bailian")
    refused(tmp_path, MOONCAKE, "trace format must be one of", fmt="parquet")


def test_not_utf8_is_a_trace_error(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n\xff\xfe,1,1\n")
    with pytest.raises(TraceError, match="bad.csv: not UTF-8"):
        list(read_trace(path, "azure"))


class _WordTokenizer:
    """One id per whitespace-separated word: counts a test can work out by eye."""

    def encode(self, text: str) -> list[int]:
        return [len(word) for word in text.split()]


def test_sharegpt_counts_with_the_models_tokenizer_when_given(tmp_path):
    convs = [{"id": "a", "conversations": [
                 {"from": "human", "value": "one two three four five"},
                 {"from": "gpt", "value": "a b c d e f"}]},
             {"id": "b", "conversations": [  # 3 words: under vLLM's 4-token floor
                 {"from": "human", "value": "xxxxxxxxxxxxxxxxxxxx yy zz"},
                 {"from": "gpt", "value": "a b c d"}]}]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(convs))
    (r,) = read_trace(path, "sharegpt", tokenizer=_WordTokenizer())
    assert (r.input_tokens, r.output_tokens, r.token_ids) == (5, 6, (3, 3, 5, 4, 4))
    # by the estimate, ceil(chars / 4), the outputs are 3 and 2 tokens: neither is kept
    assert list(read_trace(path, "sharegpt")) == []
