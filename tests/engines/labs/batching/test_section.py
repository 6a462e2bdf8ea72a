"""The batching lab's section: a JSON round trip gives the records back in one frozen record,
bad settings and fields are named, a simulated session runs to its end deterministically."""

from __future__ import annotations

import dataclasses
import json

import pytest

from inferlab.engines.labs.batching.compare import compare_policies, rate_sweep
from inferlab.engines.labs.batching.compare_records import comparison_state
from inferlab.engines.labs.batching.records import BatchingSnapshot
from inferlab.engines.labs.batching.section import batching_section, read_batching_section
from inferlab.engines.labs.batching.session import batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.serve.metrics import summarize

SMALL = dict(BATCHING_DEFAULTS, requests=30, rate_per_s=40.0)


def run_to_end(settings):
    session = batching_session(settings)
    records = []
    while not session.done:
        records.append(session.step())
    return session, records


def test_a_simulated_session_runs_to_the_end_deterministically():
    a, records = run_to_end(SMALL)
    b, again = run_to_end(SMALL)
    assert records == again and a.records == records
    assert [r.index for r in records] == list(range(len(records))) == list(range(a.step_index))
    assert all(r.clock == "simulated" and r.policy == "continuous" for r in records)
    assert sum(len(r.finished) for r in records) == 30
    metrics = a.metrics()
    assert metrics["completed"] == 30 and metrics["iterations"] == len(records)
    assert metrics["output_tokens_per_s"] > 0
    with pytest.raises(RuntimeError, match="ended"):
        a.step()


def test_section_round_trips_through_json():
    session, records = run_to_end(dict(SMALL, policy="static"))
    section = batching_section(session.settings, session.request_infos(), records,
                               session.serving_metrics())
    snapshot = read_batching_section(json.loads(json.dumps(section)))
    assert isinstance(snapshot, BatchingSnapshot) and snapshot.has_run
    assert snapshot.settings == session.settings
    assert snapshot.requests == tuple(session.request_infos())
    assert snapshot.iterations == tuple(records)
    expected = summarize(session.timings(), slo=None).to_dict()
    assert snapshot.metrics["ttft_s"] == expected["ttft_s"]
    assert snapshot.metrics["preemptions"] == sum(len(r.preempted) for r in records)
    assert snapshot.comparison == () and snapshot.sweep == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.requests = ()  # type: ignore[misc]


def test_an_empty_section_reads_as_no_run():
    snapshot = read_batching_section(batching_section(dict(BATCHING_DEFAULTS), [], [], {}))
    assert snapshot.settings == BATCHING_DEFAULTS and not snapshot.has_run
    assert snapshot.requests == () and snapshot.iterations == ()
    assert snapshot.metrics["iterations"] == 0


def test_the_comparison_and_sweep_are_read_with_the_run():
    """One read gives the Compare and Rate sweep tabs' records too (the section's `extras`),
    equal to the runs that made them; a section with only a comparison has no run."""
    settings = dict(SMALL, requests=6)
    runs = compare_policies(settings)
    points = rate_sweep(settings, [20.0, 80.0])
    session, records = run_to_end(settings)
    extras = comparison_state(runs, points)
    section = json.loads(json.dumps(batching_section(
        session.settings, session.request_infos(), records, session.serving_metrics(),
        extras)))
    snapshot = read_batching_section(section)
    assert [r.to_dict() for r in snapshot.comparison] == [r.to_dict() for r in runs]
    assert snapshot.sweep == tuple(points) and len(snapshot.sweep) == 4
    assert snapshot.iterations == tuple(records)
    alone = read_batching_section(json.loads(json.dumps(
        batching_section(session.settings, [], [], {}, extras))))
    assert not alone.has_run and len(alone.comparison) == 2 and alone.sweep == tuple(points)


@pytest.mark.parametrize(("change", "field"), [
    ({"policy": "fifo"}, "labs.batching.settings.policy"),
    ({"requests": 0}, "labs.batching.settings.requests"),
    ({"rate_per_s": "fast"}, "labs.batching.settings.rate_per_s"),
    ({"hardware": "abacus"}, "labs.batching.settings.hardware"),
])
def test_bad_settings_are_named(change, field):
    section = batching_section(dict(BATCHING_DEFAULTS) | change, [], [], {})
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        read_batching_section(section)
    with pytest.raises(ValueError, match=next(iter(change))):
        batching_session(dict(BATCHING_DEFAULTS) | change)


def test_bad_records_are_named():
    session, records = run_to_end(dict(SMALL, requests=5))
    section = json.loads(json.dumps(batching_section(
        session.settings, session.request_infos(), records, session.serving_metrics())))
    section["state"]["iterations"][2]["end_s"] = -1.0
    with pytest.raises(ValueError, match=r"iterations\[2\]"):
        read_batching_section(section)
    del section["state"]["requests"]
    with pytest.raises(ValueError, match="missing field 'requests'"):
        read_batching_section(section)
