"""engines/settings.py, and every lab's section reader checking its settings with it."""

from __future__ import annotations

import math

import pytest

from inferlab.engines.settings import Setting, check_settings, clean_settings

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
    ("inferlab.engines.roofline.memory_section:read_memory_section",
     _section({"context": 10**30}, {}), r"labs\.memory\.settings\.context: expected an integer in 1\.\.10,000,000"),
    ("inferlab.engines.rooflinelab.section:read_roofline_section",
     _section({"dtype": "fp99"}, {}), r"labs\.roofline\.settings\.dtype: expected one of fp32"),
    ("inferlab.engines.kvlab.section:read_kv_section",
     _section({"block_size": -1}, {}), r"labs\.kv\.settings\.block_size: expected an integer in 1\.\.1,024"),
    ("inferlab.engines.mculab.section:read_mcu_section",
     _section({"seed": "x"}, {}), r"labs\.mcu\.settings\.seed: expected an integer"),
    ("inferlab.engines.mculab.section:read_mcu_section",
     _section({"planner": "magic"}, {}), r"labs\.mcu\.settings\.planner: expected one of linear"),
    ("inferlab.engines.hardware.section:read_hardware_section",
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
