"""Property: any JSON-ish lab payload survives write -> read unchanged."""

import math
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.trace.jsonable import to_jsonable
from inferlab.engines.trace.snapshot import make_snapshot, read_snapshot, write_snapshot

LAB_IDS = ("hardware", "roofline", "memory", "kv", "batching", "speculative", "quant", "mcu")

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
json_ish = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
objects = st.dictionaries(st.text(max_size=6), json_ish, max_size=4)
sections = st.fixed_dictionaries({"settings": objects, "state": objects, "metrics": objects})
labs = st.dictionaries(st.sampled_from(LAB_IDS), sections, max_size=3)


def without_non_finite(value):
    """What the payload should read back as: tuples as lists, NaN/inf as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [without_non_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: without_non_finite(v) for k, v in value.items()}
    return value


@settings(max_examples=40, deadline=None)
@given(labs=labs, host=objects, active=st.none() | st.sampled_from(LAB_IDS))
def test_lab_payloads_round_trip(labs, host, active):
    snap = make_snapshot("0.1.0", host, [host], labs, active_lab=active)
    assert snap.labs == without_non_finite(labs)
    assert snap.host == to_jsonable(host) == without_non_finite(host)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snap.json"
        write_snapshot(path, snap)
        assert read_snapshot(path) == snap
