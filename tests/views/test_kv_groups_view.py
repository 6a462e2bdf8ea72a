"""The KV lab's view with layer groups: a line of each group's blocks and the bytes held
against keeping every token, and the selected sequence's table with a column per group
("—" where the window dropped the block); without groups, the view as before."""

from __future__ import annotations

import dataclasses

import numpy as np

from inferlab.engines.kv.pool_state import USED, KVPoolState
from inferlab.engines.kv.stats import KVStats
from inferlab.engines.labs.kv.records import KVGroupStep, KVRunInfo, KVStepRecord, SeqInfo, SeqStep
from inferlab.views.kv_view import KVView

INFO = KVRunInfo("s", "S", "d", "m", "m", "cpu", 4, 8, 32, 96)
SEQ = SeqInfo("a", "a", 0, "hi", "", 12, 4, 0.0, 0)


def stats(allocator: str) -> KVStats:
    return KVStats(allocator=allocator, step=0, n_seqs=1, total_slots=32, block_size=4,
                   blocks_total=8, blocks_used=3, blocks_free=5, blocks_cached_free=0,
                   slots_reserved=12, slots_filled=12, tokens_logical=12,
                   slots_external_waste=0, shared_blocks=0, shared_saved_slots=0,
                   prefix_hit_tokens=0, prefix_query_tokens=12, evictions=0,
                   bytes_per_slot=96)


def record(groups=()) -> KVStepRecord:
    state = np.zeros(8, dtype=np.uint8)
    state[:3] = USED
    owner = np.full(8, -1, dtype=np.int32)
    owner[:3] = 0
    pool = KVPoolState(4, ("a",), state, owner, (state > 0).astype(np.int32),
                       np.where(state > 0, 4, 0).astype(np.int32), ((0, 1, 2),),
                       np.arange(3, 8, dtype=np.int32))
    return KVStepRecord(0, stats("paged"), stats("contiguous"), pool, (), (),
                        (SeqStep("a", "running", "running", 0, 12, 0, ""),), (), True,
                        groups=groups, kv_held_closed=0.6)


GROUPS = (KVGroupStep("full attention", 0, 1, 3, 3, 128, ("a",), ((0, 1, 2),), 3),
          KVGroupStep("sliding window 4", 4, 2, 2, 3, 256, ("a",), ((-1, 4, 5),), 2))


def test_a_model_with_layer_groups_shows_each_groups_blocks_and_table(qtbot):
    view = KVView()
    qtbot.addWidget(view)
    view.draw(INFO, [SEQ], [record(GROUPS)])
    view.select("a")
    line = view.groups_line.text()
    assert not view.groups_line.isHidden()
    assert "896 B of 1.12 KiB" in line and "78%" in line and "closed form 60%" in line
    assert "sliding window 4 (2 layers): 2 of 3 blocks" in line
    table = view.block_table
    heads = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert heads == ["logical", "full", "fill", "ref", "W=4"]
    assert [table.item(r, 4).text() for r in range(3)] == ["—", "4", "5"]
    assert "(full attention layers)" in view.grid_title.text()


def test_without_groups_the_view_is_as_before(qtbot):
    view = KVView()
    qtbot.addWidget(view)
    view.draw(INFO, [SEQ], [dataclasses.replace(record(), kv_held_closed=1.0)])
    view.select("a")
    assert view.groups_line.isHidden()
    table = view.block_table
    assert [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())] == \
        ["logical", "physical", "fill", "ref"]
    assert [table.item(r, 1).text() for r in range(3)] == ["0", "1", "2"]
