"""The speculative lab's snapshot section: a session's steps round-trip exactly; a bad field
is refused with its name; the reader survives thousands of mutated sections (tests/fuzz.py)."""

from __future__ import annotations

import copy
import dataclasses
import json
import random

import pytest

from inferlab.engines.labs.speculative.metrics import speculative_metrics
from inferlab.engines.labs.speculative.records import SpeculativeSnapshot
from inferlab.engines.labs.speculative.section import read_speculative_section, speculative_section
from inferlab.engines.labs.speculative.session import speculative_session
from inferlab.engines.labs.speculative.settings import (
    SPECULATIVE_DEFAULTS,
    check_speculative_settings,
    speculative_defaults,
    speculative_prompts,
)
from inferlab.engines.trace.jsonable import to_jsonable
from tests.fuzz import json_paths, mutate_json_bytes, run_cases


@pytest.fixture(scope="module")
def section():
    session = speculative_session(speculative_defaults() | {"max_tokens": 24, "k": 3})
    while not session.done:
        session.step()
    return json.loads(json.dumps(to_jsonable(speculative_section(
        session.settings, session.header(), session.records)))), session


def test_prompts_of_both_groups_ship():
    from inferlab.engines.labs.speculative.settings import PROMPT_GROUPS, prompt_groups

    prompts = speculative_prompts()
    assert {p.kind for p in prompts} == {k for kinds in PROMPT_GROUPS.values() for k in kinds}
    groups = prompt_groups()
    assert set(groups) == {"grounded", "open"} and all(len(g) >= 3 for g in groups.values())
    assert sum(map(len, groups.values())) == len(prompts)
    assert all(p.text in groups["open"] for p in prompts if p.kind == "chat")
    assert all(p.title and p.text.strip() and "==" not in p.text for p in prompts)
    assert "def " in next(p.text for p in prompts if p.kind == "code")


def test_a_session_round_trips_into_a_frozen_record(section):
    data, session = section
    read = read_speculative_section(data)
    assert isinstance(read, SpeculativeSnapshot)
    settings, header, steps, metrics = read.settings, read.header, read.steps, read.metrics
    assert settings == session.settings
    assert steps == tuple(session.records)
    assert header == session.header()
    assert metrics == speculative_metrics(session.records, 3)
    assert read.sweep is None  # no sweep ran
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.steps = ()
    assert metrics["tokens"] == 24 and metrics["finish_reason"] == "length"
    assert data["metrics"] == json.loads(json.dumps(to_jsonable(metrics)))


def test_a_section_of_no_run_reads_as_no_header():
    sec = speculative_section(speculative_defaults(), None, [])
    read = read_speculative_section(sec)
    assert read.header is None and read.steps == () and read.metrics == {}
    assert read.settings["drafter"] == "ngram" and read.sweep is None


@pytest.mark.parametrize(("path", "value", "named"), [
    (("settings", "k"), 0, "labs.speculative.settings.k: expected an integer in 1..32"),
    (("settings", "top_p"), 0.0, "labs.speculative.settings.top_p: expected a number in (0, 1]"),
    (("settings", "drafter"), "lookahead", "labs.speculative.settings.drafter: expected ngram"),
    (("settings", "prompt"), "", "labs.speculative.settings.prompt: expected some text"),
    (("state", "k"), 0, "labs.speculative.state.k: expected an integer in 1..32"),
    (("state", "steps", 0, "index"), 5, "labs.speculative.state.steps[0].index: expected 0"),
    (("state", "steps", 1, "accepted"), [False, True, False],
     "labs.speculative.state.steps[1].accepted[1]: a draft accepted after a rejected one"),
    (("state", "steps", 0, "fates"), ["lucky"], "labs.speculative.state.steps[0].fates"),
    (("state", "steps", 0, "p"), [1.5], "labs.speculative.state.steps[0].p"),
    (("state", "steps", 0, "token_ids"), [-1], "labs.speculative.state.steps[0].token_ids[0]"),
    (("state", "steps", 0, "draft_s"), -1, "labs.speculative.state.steps[0].draft_s"),
    (("state", "steps", 0, "finish_reason"), "stop",
     "labs.speculative.state.steps[0].finish_reason: a step after it ran"),
    (("state", "token_texts"), {"x": "a"}, "labs.speculative.state.token_texts['x']"),
    (("state", "prompt_token_ids"), [], "labs.speculative.state.prompt_token_ids"),
    (("metrics",), [], "labs.speculative.metrics: expected an object"),
    (("state", "head_accept_by_position"), [0.5, 1.5],
     "labs.speculative.state.head_accept_by_position[1]: expected a finite number in 0..1, "
     "got 1.5"),
])
def test_a_bad_field_is_named(section, path, value, named):
    data = copy.deepcopy(section[0])
    node = data
    for key in path[:-1]:
        node = node[key]
    if path[-1] == "fates":  # a list as long as the step's tokens
        value = value * len(node["fates"])
    if path[-1] in ("p", "token_ids"):
        value = value + node[path[-1]][1:]
    if path[-1] == "accepted":
        node["drafted"] = node["drafted"][:3] + [0] * (3 - len(node["drafted"]))
    node[path[-1]] = value
    with pytest.raises(ValueError) as info:
        read_speculative_section(data)
    assert named in str(info.value)


def test_settings_are_checked_like_the_lab_inputs():
    good = check_speculative_settings(dict(SPECULATIVE_DEFAULTS, prompt="hi",
                                           drafter="layerskip:8"))
    assert good["drafter"] == "layerskip:8"
    for drafter in ("layerskip:0", "layerskip:", "layerskip:x", "layerskip:٣", "tiny:1"):
        with pytest.raises(ValueError, match="settings.drafter"):
            check_speculative_settings(dict(good, drafter=drafter))


def test_fuzz_the_section_reader(section):
    doc = section[0]
    paths = json_paths(doc)
    rng = random.Random(20261201)

    def reading(blob: bytes):
        def call():
            try:
                sec = json.loads(blob)
            except (ValueError, RecursionError):
                return  # not JSON: the snapshot reader refuses it before any lab reader
            read_speculative_section(sec)
        return call

    cases = ((label, reading(blob)) for label, blob in
             (mutate_json_bytes(doc, rng, paths) for _ in range(1500)))
    result = run_cases(cases, (ValueError,))
    print("speculative section fuzz:", result.summary())
    result.check()
    assert result.refused > result.cases // 4


def test_a_heads_per_position_acceptance_round_trips(section):
    data, session = section
    header = dataclasses.replace(session.header(), head_accept_by_position=(0.4, 0.25, 0.5))
    sec = json.loads(json.dumps(to_jsonable(speculative_section(
        session.settings, header, session.records))))
    assert read_speculative_section(sec).header == header
    del sec["state"]["head_accept_by_position"]  # a snapshot from before it was kept
    assert read_speculative_section(sec).header.head_accept_by_position == ()
