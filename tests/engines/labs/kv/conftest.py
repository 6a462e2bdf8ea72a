"""Scenario runs on the tiny model, each run once per test session and shared.

torch runs on one thread here (shared machines: multi-threaded BLAS under contention turns
microsecond matmuls into milliseconds); the previous setting is restored afterwards.
"""

from __future__ import annotations

import pytest

from tests.torch_fixtures import _one_torch_thread, tiny  # noqa: F401 - fixtures


class Run:
    """A finished session and every record it handed out, each checked against the live
    allocators at the moment it was made."""

    def __init__(self, session, records, live_stats):
        self.session = session
        self.records = records
        self.live_stats = live_stats


@pytest.fixture(scope="session")
def run_scenario(tiny):
    from inferlab.engines.labs.kv.session import KVLabSession

    cache = {}

    def run(name, **kwargs):
        key = (name, tuple(sorted(kwargs.items())))
        if key not in cache:
            session = KVLabSession(*tiny, name, **kwargs)
            records, live = [], []
            while not session.done:
                records.append(session.step())
                live.append((session.blocks.stats(records[-1].step),
                             session.contiguous.stats(records[-1].step)))
            cache[key] = Run(session, records, live)
        return cache[key]

    return run
