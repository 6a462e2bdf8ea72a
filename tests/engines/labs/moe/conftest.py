"""One short run of the tiny MoE shared by the lab's tests: batch 8, three decode steps, a
sweep over 1 and 8 (the batch reuses its own steps)."""

from __future__ import annotations

import json

import pytest

from inferlab.engines.labs.moe.records import MeasuredRoof
from inferlab.engines.labs.moe.section import moe_section
from inferlab.engines.labs.moe.session import moe_model, moe_run
from inferlab.engines.labs.moe.settings import check_moe_settings
from inferlab.engines.trace.jsonable import to_jsonable

SETTINGS = {"batch": 8, "prompts": 8, "steps": 3, "sweep": [1, 8]}
ROOF = MeasuredRoof("cpu", 1e11, 2e10)


@pytest.fixture(scope="package")
def run():
    """(settings, model, info, steps, sweep) of the short run."""
    settings = check_moe_settings(SETTINGS)
    model, _tok = moe_model(settings["model"], kernels=settings["kernels"])
    info, steps, sweep = moe_run(settings)
    return settings, model, info, steps, sweep


@pytest.fixture(scope="package")
def section(run):
    """The run's section as a file gives it back."""
    settings, model, info, steps, sweep = run
    return json.loads(json.dumps(to_jsonable(moe_section(settings, model.config, info, steps,
                                                         sweep, ROOF)), allow_nan=False))
