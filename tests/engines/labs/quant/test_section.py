"""The quant lab's snapshot section: what a run writes reads back equal; a malformed section
(seeded fuzz of a real one) raises a ValueError naming the field, nothing else."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import random

import pytest
import torch

from inferlab.engines.labs.quant.layer import analyse_layer
from inferlab.engines.labs.quant.records import QuantSnapshot
from inferlab.engines.labs.quant.section import quant_section, read_quant_section
from inferlab.engines.labs.quant.session import QuantSession
from inferlab.engines.labs.quant.settings import QUANT_DEFAULTS
from inferlab.engines.quant.schemes import scheme


@pytest.fixture(scope="module")
def section():
    session = QuantSession.open("tiny", eval_text="A clock counts the swings of a pendulum. " * 3)
    runs = [session.run(name, decode_tokens=None) for name in ("fp32", "int8", "kv-fp8")]
    layer = session.analyse(1, "qkv", "q4_0")
    settings = dict(QUANT_DEFAULTS, model="tiny", schemes=["fp32", "int8", "kv-fp8"])
    eval_texts = {k: len(v) for k, v in session.eval_sets.items()}
    return json.loads(json.dumps(quant_section(settings, session.model_name, eval_texts, layer,
                                               runs, session.ppl_method()))), runs, layer


def test_a_section_reads_back_equal(section):
    sec, runs, layer = section
    record = read_quant_section(sec)
    eval_tokens = record.eval_tokens
    assert record.model == "tiny"
    assert eval_tokens == len(b"A clock counts the swings of a pendulum. " * 3)
    assert record.eval_texts == {"eval": eval_tokens}
    assert record.ppl_method() == {"ppl_convention": "sliding", "ppl_window_tokens": 1024,
                                   "ppl_stride_tokens": 1023}
    assert record.runs[1].perplexity_by_text == {"eval": record.runs[1].perplexity}
    assert record.runs == tuple(runs)
    assert record.layer == layer
    assert record.settings["schemes"] == ["fp32", "int8", "kv-fp8"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.runs = ()
    assert sec["metrics"]["fp32_perplexity"] == runs[0].perplexity
    assert runs[2].kv_bytes_per_token < runs[0].kv_bytes_per_token


def test_an_empty_section_is_a_lab_that_had_not_run():
    sec = quant_section(dict(QUANT_DEFAULTS), None, 0, None, [])
    assert read_quant_section(sec) == QuantSnapshot(dict(QUANT_DEFAULTS))


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            yield from _paths(v, (*path, i))


BAD = [None, "x", -1, 1e308 * 10, [], {}, True, 2**70]


def test_seeded_fuzz_every_field_gives_a_value_error_or_reads(section):
    sec = section[0]
    paths = [p for p in _paths(sec) if p]
    rng = random.Random(1234)
    for _ in range(400):
        bad = copy.deepcopy(sec)
        path = rng.choice(paths)
        target = bad
        for key in path[:-1]:
            target = target[key]
        if rng.random() < 0.2 and isinstance(target, dict):
            del target[path[-1]]
        else:
            target[path[-1]] = rng.choice(BAD)
        try:
            read_quant_section(bad)
        except ValueError as e:
            assert str(e).startswith("labs.quant"), str(e)


@pytest.mark.parametrize("path,value,message", [
    (("state", "runs", 0, "perplexity"), 0.5, "runs[0].perplexity"),
    (("state", "runs", 1, "scheme"), "int3", "runs[1].scheme: expected one of"),
    (("state", "layer", "hist_counts"), [1, 2], "hist_edges: expected one more edge"),
    (("settings", "linear"), "lm_head", "settings.linear: expected one of"),
    (("state", "layer", "shape"), [8], "layer.shape: expected [out, in], got [8]"),
    (("state", "layer", "hist_counts", 0), 2**70, "hist_counts[0]: expected an integer >= 0"),
    (("state", "layer", "clip_range"), [0.0, "x"], "clip_range[1]: expected a finite number"),
    (("state", "runs", 0, "sample_text"), "\ud800", "runs[0].sample_text: expected text"),
    (("state", "runs", 1, "sqnr_db"), {"layers.0.o": 1e5}, "sqnr_db['layers.0.o']: expected"),
])
def test_named_errors(section, path, value, message):
    bad = copy.deepcopy(section[0])
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_quant_section(bad)


def test_an_exact_reproduction_reads_back_as_infinite_sqnr():
    """Q4_1 of weights already on a Q4_1 grid (SmolLM2's, dequantized) is exact: SQNR = inf,
    which JSON stores as null."""
    w = scheme("q4_1").round_trip(torch.randn(8, 64, generator=torch.Generator().manual_seed(3)))
    layer = analyse_layer(w, "q4_1", "layers.0.o")
    assert layer.error.sqnr_db == math.inf and layer.error.max_abs_error == 0
    sec = json.loads(json.dumps(quant_section(dict(QUANT_DEFAULTS), "tiny", 10, layer, []),
                                allow_nan=True).replace("Infinity", "null"))
    assert read_quant_section(sec).layer == layer
