"""A mutated `labs.moe` section is read or refused with a ValueError naming a field of
labs.moe, never another error; what is read gives its formulas without raising (the window's
own fuzz, tests/app/test_snapshot_fuzz.py, also draws it)."""

from __future__ import annotations

import random

from inferlab.engines.labs.moe.formulas import moe_formulas
from inferlab.engines.labs.moe.section import read_moe_section
from tests.fuzz import mutate_value, run_cases, sampled_paths

CASES = 150


def test_mutated_sections_are_read_or_refused_by_name(section):
    rng = random.Random("moe-section")
    paths = sampled_paths(section)
    refusals = []

    def case(mutated):
        def call():
            try:
                snapshot = read_moe_section(mutated)
            except ValueError as e:
                refusals.append(str(e))
                raise
            moe_formulas(snapshot)
        return call

    def cases():
        for _ in range(CASES):
            label, mutated = mutate_value(section, rng, paths)
            yield label, case(mutated)

    result = run_cases(cases(), (ValueError,))
    result.check()
    assert result.refused > 0 and result.ok > 0
    assert all(r.startswith("labs.moe") for r in refusals), refusals[:5]
