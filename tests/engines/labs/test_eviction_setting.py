"""The radix tree's eviction order as a lab setting: `--eviction-policy` on `run kv` and
`run batching` and the settings of both labs reach the tree that evicts; a bad name is
refused by name; a snapshot from before the setting reads as LRU."""

from __future__ import annotations

import pytest

from inferlab.app.cli import main
from inferlab.engines.labs.batching.session import batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS, check_batching_settings
from inferlab.engines.labs.kv.session import kv_run
from inferlab.engines.labs.kv.settings import KV_DEFAULTS


@pytest.mark.parametrize("policy", ["lru", "lfu", "fifo"])
def test_both_labs_hand_their_order_to_the_tree(policy):
    session, _ = kv_run(dict(KV_DEFAULTS, model="tiny", scenario="multi-turn",
                             prefix_cache="radix", eviction_policy=policy), max_steps=1)
    assert session.runner.blocks.radix.tree.eviction_policy == policy
    for clock in ("simulated", "wall"):
        batching = batching_session(dict(BATCHING_DEFAULTS, clock=clock, model="tiny",
                                         scenario="multi-turn", prefix_cache="radix",
                                         eviction_policy=policy))
        assert batching.engine.scheduler.blocks.radix.tree.eviction_policy == policy


def test_a_bad_order_is_refused_by_name(capsys):
    for lab in ("kv", "batching"):
        with pytest.raises(SystemExit) as done:
            main(["run", lab, "--eviction-policy", "random"])
        assert done.value.code == 2
        assert "--eviction-policy" in capsys.readouterr().err
    with pytest.raises(ValueError, match="eviction_policy"):
        check_batching_settings(dict(BATCHING_DEFAULTS, eviction_policy="mru"), "settings")


def test_settings_from_before_read_as_lru():
    old = {k: v for k, v in BATCHING_DEFAULTS.items() if k != "eviction_policy"}
    assert check_batching_settings(old, "settings")["eviction_policy"] == "lru"
