"""The KV lab on a model with sliding-window layers: each step's record holds every layer
group's tables and blocks (the window's dropped entries -1), the bytes held against keeping
every token beside the closed form, and a snapshot gives them back."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.kv.records import step_from_dict, step_to_dict
from inferlab.engines.labs.kv.session import KVLabSession
from inferlab.engines.model.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def gemma3_run():
    pytest.importorskip("transformers")
    from inferlab.engines.model.hf_config import model_config_from_hf
    from inferlab.engines.model.llama import Llama
    from tests.engines.model.hf_reference import hf_model, hf_state_dict

    hf, config = hf_model("gemma3_text")
    model = Llama.from_state_dict(model_config_from_hf(config, id="gemma3-tiny"),
                                  hf_state_dict(hf), "fp32", kernels="torch")
    session = KVLabSession(model, Tokenizer.byte_level(), "ragged", block_size=4)
    return session, session.run(max_steps=30)


def test_every_record_holds_each_groups_blocks_and_tables(gemma3_run):
    session, records = gemma3_run
    rec = records[-1]
    full, sliding = rec.groups
    assert (full.name, full.window, full.n_layers) == ("full attention", 0, 1)
    assert (sliding.name, sliding.window, sliding.n_layers) == ("sliding window 8", 8, 2)
    running = [q.seq_id for q in rec.seqs if q.status == "running"]
    assert set(full.seq_ids) == set(running) and running
    assert full.blocks_held == full.blocks_full  # the global layer keeps every token
    assert sliding.blocks_held <= len(running) * (8 // 4 + 1) < sliding.blocks_full
    assert full.bytes_per_block * 2 == sliding.bytes_per_block  # 2 layers against 1
    for sid in running:
        table = sliding.table(sid)
        assert -1 in table and all(b >= 0 for b in table[-2:])  # the window: 2 or 3 blocks
        assert len(table) == len(full.table(sid)) and -1 not in full.table(sid)
        assert full.table(sid) == rec.pool.block_tables[rec.pool.seq_ids.index(sid)]
    assert rec.held_bytes < rec.full_bytes
    assert rec.kv_held_closed < 1 and abs(rec.held_bytes / rec.full_bytes
                                          - rec.kv_held_closed) < 0.1
    assert rec.used_bytes <= rec.held_bytes
    assert records[0].groups[1].blocks_held == records[0].groups[1].blocks_full  # at first


def test_a_snapshot_gives_the_groups_back_and_older_ones_read_without_them(gemma3_run):
    _session, records = gemma3_run
    rec = records[-1]
    back = step_from_dict(step_to_dict(rec), "step")
    assert back.groups == rec.groups and back.kv_held_closed == rec.kv_held_closed
    old = step_to_dict(rec)
    del old["groups"], old["kv_held_closed"]
    assert step_from_dict(old, "step").groups == ()
    bad = step_to_dict(rec)
    bad["groups"][1]["block_tables"] = bad["groups"][1]["block_tables"][:-1]
    with pytest.raises(ValueError, match="one table per sequence"):
        step_from_dict(bad, "step")
