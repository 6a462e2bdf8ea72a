"""engines/fields.py, and every lab's section reader checking its settings with it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.fields import Setting, check_settings, clean_settings

TABLE = {"n": Setting("int", 1, 10), "x": Setting("float", 0.05, 1.0),
         "name": Setting("str", choices=("a", "b")), "flag": Setting("bool"),
         "names": Setting("str-list", choices=lambda: ["p", "q"])}
DEFAULTS = {"n": 2, "x": 0.5, "name": "a", "flag": False, "names": []}


def test_valid_settings_pass_and_defaults_fill_in():
    got = check_settings({"n": 10, "x": 1, "names": ["q"]}, TABLE, DEFAULTS, "labs.t.settings")
    assert got == {"n": 10, "x": 1, "name": "a", "flag": False, "names": ["q"]}
    assert check_settings({"extra": [1]}, TABLE, DEFAULTS, "w")["extra"] == [1]  # kept as is


@pytest.mark.parametrize(("field", "value", "message"), [
    ("n", 0, r"labs\.t\.settings\.n: expected an integer in 1\.\.10, got 0"),
    ("n", 11, r"in 1\.\.10, got 11"),
    ("n", 2.0, r"expected an integer"),
    ("n", True, r"expected an integer"),
    ("n", 10**30, r"got 1000000000000000000000000000000"),
    ("x", math.nan, r"expected a finite number in 0\.05\.\.1, got nan"),
    ("x", math.inf, r"got inf"),
    ("x", "0.5", r"expected a finite number"),
    ("name", "c", r"expected one of a, b, got 'c'"),
    ("name", 3, r"expected a name"),
    ("flag", 1, r"expected true or false"),
    ("names", ["p", "z"], r"expected one of p, q, got 'z'"),
    ("names", "p", r"expected a list of names"),
])
def test_each_bad_field_is_named_with_its_range(field, value, message):
    with pytest.raises(ValueError, match=message):
        check_settings({field: value}, TABLE, DEFAULTS, "labs.t.settings")
    assert clean_settings({field: value, "n": 3}, TABLE, DEFAULTS) == dict(DEFAULTS, n=3)


def test_settings_must_be_an_object():
    with pytest.raises(ValueError, match="labs.t.settings: expected an object, got list"):
        check_settings([], TABLE, DEFAULTS, "labs.t.settings")
    assert clean_settings(None, TABLE, DEFAULTS) == DEFAULTS


def _section(settings, state):
    return {"settings": settings, "state": state, "metrics": {}}


@pytest.mark.parametrize(("reader", "section", "message"), [
    ("inferlab.engines.labs.memory.section:read_memory_section",
     _section({"context": 10**30}, {}), r"labs\.memory\.settings\.context: expected an integer in 1\.\.10,000,000"),
    ("inferlab.engines.labs.roofline.section:read_roofline_section",
     _section({"dtype": "fp99"}, {}), r"labs\.roofline\.settings\.dtype: expected one of fp32"),
    ("inferlab.engines.labs.kv.section:read_kv_section",
     _section({"block_size": -1}, {}), r"labs\.kv\.settings\.block_size: expected an integer in 1\.\.1,024"),
    ("inferlab.engines.labs.mcu.section:read_mcu_section",
     _section({"seed": "x"}, {}), r"labs\.mcu\.settings\.seed: expected an integer"),
    ("inferlab.engines.labs.mcu.section:read_mcu_section",
     _section({"planner": "magic"}, {}), r"labs\.mcu\.settings\.planner: expected one of linear"),
    ("inferlab.engines.labs.hardware.section:read_hardware_section",
     _section({"sample_hz": 1e9}, {"devices": []}), r"labs\.hardware\.settings\.sample_hz"),
])
def test_every_lab_reader_checks_its_settings(reader, section, message):
    from inferlab.app.labs.registry import resolve

    if "memory" in reader:  # give it a valid state so that only the settings are wrong
        from inferlab.engines.model.config import load_model_preset

        section["state"] = {"model_config": load_model_preset("llama-3-8b").to_dict(),
                            "target": {"label": "x", "memory_bytes": 1}}
    with pytest.raises(ValueError, match=message):
        resolve(reader)(section)


# ---- the rest of a section: objects, lists and maps read with the same checks ------------

def test_numbers_past_a_doubles_range_and_huge_integers_are_refused_not_raised():
    for kind in ("int", "float"):
        with pytest.raises(ValueError, match=r"w: expected .*got an integer of about 401 digits"):
            Setting(kind).check(10**400, "w")
    with pytest.raises(ValueError, match=r"w: expected an integer, got 9223372036854775808"):
        Setting("int").check(2**63, "w")
    assert Setting("float", 0, none=True).check(None, "w") is None
    with pytest.raises(ValueError, match=r"w\[1\]: expected a finite number >= 0, got -1"):
        Setting("float-list", 0).check([1, -1], "w")
    with pytest.raises(ValueError, match=r"w: expected text of at most 3 characters, got 4"):
        Setting("str", max_len=3).check("abcd", "w")


def test_a_long_value_is_shown_by_its_size():
    from inferlab.engines.fields import shown

    assert shown([0] * 1000) == "a list of 1,000 items"
    assert shown("x" * 100) == "text of 100 characters"
    assert shown([1, 2]) == "[1, 2]"
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    assert shown(nested) == "a deeply nested list"  # past the recursion limit: no repr


def test_read_fields_names_the_path_of_a_bad_or_missing_field():
    from inferlab.engines.fields import read_fields, read_list, read_map

    table = {"p50": Setting("float", 0, none=True),
             "runs": lambda v, w: read_list(v, Setting("int", 0), w, 2),
             "peaks": lambda v, w: read_map(v, Setting("float", 0), w)}
    good = {"p50": None, "runs": [1, 2], "peaks": {"fp32": 1.0}, "extra": "dropped"}
    assert read_fields(good, table, "m") == {"p50": None, "runs": [1, 2], "peaks": {"fp32": 1.0}}
    assert read_fields({"p50": 1}, table, "m", optional={"runs": [], "peaks": {}})["runs"] == []
    for bad, message in (
            (dict(good, p50=[]), r"m\.p50: expected a finite number >= 0, got \[\]"),
            (dict(good, runs=[1, "x"]), r"m\.runs\[1\]: expected an integer >= 0, got 'x'"),
            (dict(good, runs=[1, 2, 3]), r"m\.runs: expected a list of at most 2 items, got 3"),
            (dict(good, peaks={"fp32": math.inf}), r"m\.peaks\['fp32'\]: .* got inf"),
            ({"runs": [], "peaks": {}}, r"m: missing field 'p50'"),
            (0.5, r"m: expected an object, got 0\.5")):
        with pytest.raises(ValueError, match=message):
            read_fields(bad, table, "m")


def test_read_tuple_reads_a_row_of_fixed_length_item_by_item():
    from inferlab.engines.fields import read_tuple

    pair = (Setting("float", 0), Setting("int", 1))
    assert read_tuple([0.5, 3], pair, "p", "[time_s, count]") == (0.5, 3)
    for bad, message in (
            ([0.5], r"p: expected \[time_s, count\], got \[0\.5\]"),
            ([0.5, 3, 4], r"p: expected \[time_s, count\], got \[0\.5, 3, 4\]"),
            ({"a": 1}, r"p: expected \[time_s, count\], got \{'a': 1\}"),
            ([0.5, 0], r"p\[1\]: expected an integer >= 1, got 0"),
            ([math.nan, 3], r"p\[0\]: expected a finite number >= 0, got nan")):
        with pytest.raises(ValueError, match=message):
            read_tuple(bad, pair, "p", "[time_s, count]")


def test_named_prefixes_a_records_own_error_with_its_field():
    from inferlab.engines.fields import named

    with pytest.raises(ValueError, match=r"^labs\.x\.state\.roofs: field 'repeats' must be"):
        with named("labs.x.state.roofs"):
            raise ValueError("field 'repeats' must be a positive integer")
    with pytest.raises(ValueError, match=r"^labs\.x\.state\.roofs\.a: bad$"):  # already named
        with named("labs.x.state.roofs"):
            raise ValueError("labs.x.state.roofs.a: bad")


def test_read_dataclass_reads_each_field_by_its_annotation():
    from dataclasses import dataclass

    from inferlab.engines.fields import read_dataclass

    @dataclass(frozen=True)
    class Region:
        seq_id: str
        start: int
        share: float = 0.0
        note: str | None = None

    assert read_dataclass(Region, {"seq_id": "a", "start": 3, "x": 1}, "r") == Region("a", 3)
    with pytest.raises(ValueError, match=r"r\.start: expected an integer >= 0, got -1"):
        read_dataclass(Region, {"seq_id": "a", "start": -1}, "r", {"start": Setting("int", 0)})
    with pytest.raises(ValueError, match=r"r\.share: expected a finite number, got nan"):
        read_dataclass(Region, {"seq_id": "a", "start": 0, "share": math.nan}, "r")
    with pytest.raises(ValueError, match=r"r: missing field 'start'"):
        read_dataclass(Region, {"seq_id": "a"}, "r")


def test_read_int_array_checks_a_whole_list_at_once():
    from inferlab.engines.fields import read_int_array

    assert read_int_array([0, 3, -1], "w", -1, 3).tolist() == [0, 3, -1]
    for bad, message in (([0, 4], r"w: expected integers in -1\.\.3, got 4"),
                         ([0, 1.5], r"w: expected a list of integers, got \[0, 1\.5\]"),
                         ([[0], [1]], r"w: expected a list of integers"),
                         ([0, 2**70], r"w: expected a list of integers"), ("0", r"got '0'")):
        with pytest.raises(ValueError, match=message):
            read_int_array(bad, "w", -1, 3)


# ---- a record's own fields: the readers that also take what an engine hands out -------------

def test_read_count_takes_a_numpy_integer_and_refuses_the_rest():
    import numpy as np

    from inferlab.engines.fields import read_count

    assert read_count(0, "n") == 0 and read_count(2**63 - 1, "n") == 2**63 - 1
    got = read_count(np.int64(7), "n")
    assert got == 7 and type(got) is int
    for bad, message in ((-1, r"n: expected an integer >= 0, got -1"),
                         (True, r"n: expected an integer >= 0, got True"),
                         (1.0, r"got 1\.0"), ("3", r"got '3'"), (None, r"got None"),
                         (2**63, r"got 9223372036854775808"),
                         (np.int64(-2), r"got -2"), (np.float64(2.0), r"got np\.float64\(2\.0\)")):
        with pytest.raises(ValueError, match=message):
            read_count(bad, "n")


def test_read_float_returns_a_float_in_its_range():
    import numpy as np

    from inferlab.engines.fields import read_float, read_probability, read_seconds

    for value, low, high, want in ((0.5, None, None, 0.5), (-3, None, None, -3.0),
                                   (np.float32(0.25), 0, 1, 0.25), (np.int32(2), 0, None, 2.0),
                                   (1e9, 0, 1e9, 1e9)):
        got = read_float(value, "t", low, high)
        assert got == want and type(got) is float
    assert type(read_seconds(0, "t")) is float and read_probability(1, "p") == 1.0
    for call, message in (
            (lambda: read_float(math.nan, "t"), r"t: expected a finite number, got nan"),
            (lambda: read_float(-math.inf, "t"), r"t: expected a finite number, got -inf"),
            (lambda: read_float(True, "t"), r"t: expected a finite number, got True"),
            (lambda: read_float("0", "t"), r"got '0'"),
            (lambda: read_float(10**400, "t"), r"got an integer of about 401 digits"),
            (lambda: read_float(1e9 + 1, "t", 0, 1e9), r"t: expected a finite number in "
                                                        r"0\.\.1,000,000,000"),
            (lambda: read_seconds(-0.5, "start_s"), r"start_s: expected a finite number >= 0, "
                                                    r"got -0\.5"),
            (lambda: read_seconds(np.float64(math.nan), "t"), r"got nan"),
            (lambda: read_probability(1.5, "p"), r"p: expected a finite number in 0\.\.1, "
                                                 r"got 1\.5")):
        with pytest.raises(ValueError, match=message):
            call()


def test_read_floats_reads_a_list_or_tuple_as_floats_and_names_a_bad_item():
    from inferlab.engines.fields import read_floats

    assert read_floats([0, 0.5, 2], "t") == (0.0, 0.5, 2.0)
    assert type(read_floats((1, 2), "t")[0]) is float and read_floats([], "t") == ()
    assert read_floats([1e308, 1e308], "t") == (1e308, 1e308)  # their sum overflows: each is fine
    for bad, kwargs, message in (
            ([0.5, math.nan], {}, r"t\[1\]: expected a finite number, got nan"),
            ([0.5, math.inf, -math.inf], {}, r"t\[1\]: .* got inf"),
            ([1, 10**400], {}, r"t\[1\]: .* got an integer of about 401 digits"),
            ([1, 2**63], {}, r"t\[1\]: expected a finite number, got 9223372036854775808"),
            ([0.5, True], {}, r"t\[1\]: .* got True"),
            ([0.5, None], {}, r"t\[1\]: .* got None"),
            ([0.5, 1.5], {"low": 0, "high": 1}, r"t\[1\]: expected a finite number in 0\.\.1"),
            ([0.5, -1], {"low": 0}, r"t\[1\]: expected a finite number >= 0, got -1"),
            ([0.5] * 3, {"max_len": 2}, r"t: expected a list of at most 2 numbers, got 3"),
            ("0.5", {}, r"t: expected a list of numbers, got '0\.5'")):
        with pytest.raises(ValueError, match=message):
            read_floats(bad, "t", **kwargs)


def test_read_name_wants_non_empty_text():
    from inferlab.engines.fields import read_name

    assert read_name("r0001", "id") == "r0001" and read_name("café", "id") == "café"
    for bad, message in (("", r"id: expected a name \(non-empty text\), got ''"),
                         (3, r"id: expected text, got 3"), (None, r"got None"),
                         ("\ud800", r"id: expected text, got a lone surrogate")):
        with pytest.raises(ValueError, match=message):
            read_name(bad, "id")


def test_read_names_reads_ids_as_a_tuple():
    from inferlab.engines.fields import read_names

    ids = ("r0001", "r0002")
    assert read_names(ids, "d") is ids  # an engine's tuple of plain ids: kept as it is
    assert read_names(["a", "é"], "d") == ("a", "é") and read_names([], "d") == ()
    for bad, message in (("a", r"d: expected a list of names, got 'a'"),
                         (("a", 3), r"d: expected a list of names, got \['a', 3\]"),
                         (["a", "\ud800"], r"d: expected text, got a lone surrogate"),
                         (None, r"d: expected a list of names, got None")):
        with pytest.raises(ValueError, match=message):
            read_names(bad, "d")


def test_as_tuple_and_or_none_adapt_a_reader():
    from inferlab.engines.fields import as_tuple, or_none, read_count

    ids = as_tuple(Setting("str-list"))
    assert ids(("a", "b"), "w") == ("a", "b") and ids(["a"], "w") == ("a",) and ids([], "w") == ()
    with pytest.raises(ValueError, match=r"w: expected a list of names, got 'a'"):
        ids("a", "w")
    with pytest.raises(ValueError, match=r"w: expected a list of names, got \('a', 3\)|w: "
                                         r"expected a list of names, got \['a', 3\]"):
        ids(("a", 3), "w")
    maybe = or_none(read_count)
    assert maybe(None, "w") is None and maybe(3, "w") == 3
    with pytest.raises(ValueError, match=r"w: expected an integer >= 0, got -1"):
        maybe(-1, "w")


def test_check_fields_reads_a_records_fields_in_place():
    from dataclasses import dataclass

    import numpy as np

    from inferlab.engines.fields import as_tuple, check_fields, read_count, read_seconds

    @dataclass(frozen=True)
    class Span:
        n: int
        start_s: float
        ids: tuple = ()

        def __post_init__(self):
            check_fields(self, {"n": read_count, "start_s": read_seconds,
                                "ids": as_tuple(Setting("str-list"))})

    span = Span(np.int64(3), 1, ["a"])
    assert span == Span(3, 1.0, ("a",))
    assert type(span.n) is int and type(span.start_s) is float and type(span.ids) is tuple
    with pytest.raises(ValueError, match=r"^start_s: expected a finite number >= 0, got -1$"):
        Span(0, -1)
    with pytest.raises(ValueError, match=r"^ids: expected a list of names"):
        Span(0, 0.0, "a")


def test_number_and_name_lists_read_at_a_glance_as_item_by_item():
    """The lists' fast path (a few passes in C) gives what reading item by item gives."""
    int_list = Setting("int-list", -5, 5)
    assert int_list.check([-5, 0, 5], "w") == [-5, 0, 5]
    for bad, message in (([0, 6], r"w\[1\]: expected an integer in -5\.\.5, got 6"),
                         ([0, 1.0], r"w\[1\]: .* got 1\.0"), ([True], r"w\[0\]: .* got True")):
        with pytest.raises(ValueError, match=message):
            int_list.check(bad, "w")
    names = Setting("str-list")
    assert names.check(["a", "é"], "w") == ["a", "é"]
    with pytest.raises(ValueError, match=r"w: expected text, got a lone surrogate"):
        names.check(["a", "\ud800"], "w")


_ITEMS = (st.integers(-(2**70), 2**70) | st.floats() | st.booleans() | st.none()
          | st.sampled_from(["x", "\ud800"]))
_BOUND = st.none() | st.integers(-100, 100) | st.floats(-100, 100)


def _item_by_item(setting: Setting, values: list):
    """What a list setting reads, one item at a time (the reference): a list or the error."""
    item = Setting(setting.kind[:-5], setting.low, setting.high)
    try:
        return [item.check(v, f"w[{i}]") for i, v in enumerate(values)]
    except ValueError as e:
        return str(e)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(["int-list", "float-list"]), low=_BOUND, high=_BOUND,
       values=st.lists(_ITEMS, max_size=8)
       | st.lists(st.integers(-10, 10) | st.floats(-10, 10), max_size=8))
def test_a_list_of_numbers_reads_as_item_by_item(kind, low, high, values):
    setting = Setting(kind, low, high)
    want = _item_by_item(setting, values)
    try:
        got = setting.check(values, "w")
    except ValueError as e:
        got = str(e)
    assert got == want
    if isinstance(want, list):
        assert list(map(type, got)) == list(map(type, want))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-(2**70), 2**70) | st.floats(), max_size=8),
       low=st.none() | st.just(0.0))
def test_read_floats_agrees_with_read_float_item_by_item(values, low):
    from inferlab.engines.fields import read_float, read_floats

    try:
        want = tuple(read_float(v, f"w[{i}]", low) for i, v in enumerate(values))
    except ValueError as e:
        want = str(e)
    try:
        got = read_floats(tuple(values), "w", low)
    except ValueError as e:
        got = str(e)
    assert got == want
