"""One short run of the tiny model shared by the step lab's tests: a decode step at batch 2
over 20 cached tokens, eager and native, one thread."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.step.session import step_run
from inferlab.engines.labs.step.settings import check_step_settings

SETTINGS = {"batch": 2, "context": 20, "repeats": 3, "threads": 1,
            "executions": ["eager", "native"]}


@pytest.fixture(scope="package")
def run():
    """(settings, info, executions) of the short run."""
    settings = check_step_settings(SETTINGS)
    info, executions = step_run(settings)
    return settings, info, executions
