"""The serving engine's records (engines/serve/records.py) refuse wrong types and non-finite
times, naming the field."""

from __future__ import annotations

import json
import math
from dataclasses import fields as dc_fields

import numpy as np
import pytest

from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import SimulatedExecutor
from inferlab.engines.serve.records import IterationRecord, PrefillSlice, RequestInfo
from inferlab.engines.serve.scheduler import Scheduler
from inferlab.engines.serve.workload import LengthDist, Workload, generate


def _iteration(**changes):
    fields = dict(index=0, policy="continuous", clock="simulated", start_s=0.0, end_s=0.5,
                  prefills=(PrefillSlice("a", 0, 8),), decodes=("b",), preempted=(),
                  finished=("b",), kv_used_blocks=3, kv_total_blocks=8, waiting=1, running=2)
    fields.update(changes)
    return IterationRecord(**fields)


def test_round_trip_through_json():
    record = _iteration()
    again = IterationRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record
    info = RequestInfo("a", 0.25, 8, 4, "hello")
    assert RequestInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info


def test_numpy_scalars_become_plain_numbers_and_lists_tuples():
    info = RequestInfo("a", np.float64(0.5), np.int64(8), np.int32(4))
    assert type(info.arrival_s) is float and type(info.prompt_tokens) is int
    record = _iteration(start_s=np.float32(0.0), kv_used_blocks=np.int64(3),
                        decodes=["b"], prefills=[PrefillSlice("a", 0, 8)])
    assert record.decodes == ("b",) and isinstance(record.prefills, tuple)
    json.dumps(record.to_dict())


@pytest.mark.parametrize("changes, field", [
    ({"arrival_s": math.nan}, "arrival_s"),
    ({"arrival_s": "0"}, "arrival_s"),
    ({"prompt_tokens": 8.0}, "prompt_tokens"),
    ({"max_new_tokens": True}, "max_new_tokens"),
    ({"max_new_tokens": -1}, "max_new_tokens"),
    ({"request_id": ""}, "request_id"),
    ({"prompt": None}, "prompt"),
])
def test_request_info_refuses(changes, field):
    fields = dict(request_id="a", arrival_s=0.0, prompt_tokens=8, max_new_tokens=4) | changes
    with pytest.raises(ValueError, match=field):
        RequestInfo(**fields)


@pytest.mark.parametrize("changes, field", [
    ({"start_s": math.inf}, "start_s"),
    ({"end_s": math.nan}, "end_s"),
    ({"end_s": -1.0}, "end_s"),
    ({"clock": "cpu"}, "clock"),
    ({"index": -1}, "index"),
    ({"kv_used_blocks": 1.5}, "kv_used_blocks"),
    ({"waiting": None}, "waiting"),
    ({"decodes": ("b", 3)}, "decodes"),
    ({"preempted": "b"}, "preempted"),
    ({"prefills": (("a", 0, 8),)}, "prefills"),
])
def test_iteration_record_refuses(changes, field):
    with pytest.raises(ValueError, match=field):
        _iteration(**changes)


def test_prefill_slice_refuses_and_from_dict_names_the_place():
    with pytest.raises(ValueError, match="n_tokens"):
        PrefillSlice("a", 0, -1)
    data = json.loads(json.dumps(_iteration().to_dict()))
    data["prefills"][0]["start"] = "zero"
    with pytest.raises(ValueError, match=r"iteration\.prefills\[0\]: start"):
        IterationRecord.from_dict(data)
    data = json.loads(json.dumps(_iteration().to_dict())) | {"end_s": None}
    with pytest.raises(ValueError, match="iteration: end_s"):
        IterationRecord.from_dict(data)


def test_the_engines_unchecked_records_are_what_the_checks_make():
    cfg = load_model_preset("llama-3-8b")
    items = generate(Workload(30, rate_per_s=40.0, prompt_len=LengthDist.uniform(20, 300),
                              output_len=LengthDist.uniform(10, 60), seed=2))
    engine = ServingEngine(Scheduler("continuous", BlockManager(40, 16), 256, 8),
                           SimulatedExecutor(cfg, (1e15, 3e12)),
                           requests_from_workload(items, cfg.vocab_size))
    records = engine.run()
    assert any(r.prefills for r in records) and any(r.preempted for r in records)
    for r in records:
        checked = IterationRecord(**{f.name: getattr(r, f.name) for f in dc_fields(r)})
        assert checked == r and checked.to_dict() == r.to_dict()
        assert all(type(getattr(r, f.name)) is type(getattr(checked, f.name))
                   for f in dc_fields(r))
