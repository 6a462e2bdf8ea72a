"""The KV lab: the block grid and address line draw pool states exactly; the lab steps a real
(tiny) model in the background; snapshots export, reopen read-only, and come from the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import Qt

from inferlab.engines.kv.pool_state import CACHED_FREE, FREE, SHARED, USED, KVPoolState
from inferlab.engines.labs.kv import section as kvlab_section
from inferlab.engines.labs.kv.bench import synthetic_pool
from inferlab.engines.labs.kv.records import ContiguousRegion
from inferlab.engines.labs.kv.section import kv_section, read_kv_section
from inferlab.engines.labs.kv.session import kv_run
from inferlab.engines.labs.kv.settings import KV_DEFAULTS
from inferlab.views.kv_contiguous import address_codes
from inferlab.views.kv_grid import (
    CACHED_CODE,
    CACHED_DIM,
    EXTERNAL_CODE,
    FREE_CODE,
    FREE_DIM,
    LUT,
    PAD,
    SEQ_COLORS,
    SHARED_CODE,
    SHARED_DIM,
    KVGridPlot,
    block_codes,
    describe_block,
    owner_code,
)
from tests.app.lab_helpers import wait_idle


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """The tiny model on one thread: multi-threaded BLAS on shared cores waits more than it works."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def hand_pool() -> KVPoolState:
    """10 blocks: a (blocks 0, 2, 5; 5 partly filled), b (1, 2: 2 is shared), 3 and 7
    cached-free, the rest free."""
    state = np.array([USED, USED, SHARED, CACHED_FREE, FREE, USED, FREE, CACHED_FREE, FREE, FREE],
                     dtype=np.uint8)
    owner = np.array([0, 1, 0, -1, -1, 0, -1, -1, -1, -1], dtype=np.int32)
    ref = np.array([1, 1, 2, 0, 0, 1, 0, 0, 0, 0], dtype=np.int32)
    fill = np.array([4, 4, 4, 4, 0, 1, 0, 4, 0, 0], dtype=np.int32)
    return KVPoolState(block_size=4, seq_ids=("a", "b"), state=state, owner=owner,
                       ref_count=ref, n_tokens=fill, block_tables=((0, 2, 5), (1, 2)),
                       free_queue=np.array([4, 6, 8, 9, 3, 7], dtype=np.int32))


def hex_of(code: int) -> str:
    r, g, b, _ = LUT[code]
    return f"#{r:02X}{g:02X}{b:02X}"


def test_grid_image_matches_the_pool_state(qtbot):
    pool = hand_pool()
    colors = np.array([3, 7])  # a is colour 3, b colour 7
    grid = KVGridPlot()
    qtbot.addWidget(grid)
    grid.resize(400, 200)
    grid.draw(pool, colors)
    rows, cols = grid.image.shape
    assert rows * cols >= 10 and (rows - 1) * cols < 10
    assert grid.image.dtype == np.uint8
    assert np.array_equal(grid.image_item.image, grid.image)
    assert tuple(grid.image_item.levels) == (0, 255) and grid.image_item.lut.shape == (256, 4)
    flat = grid.image.ravel()
    expected = [owner_code(3), owner_code(7), SHARED_CODE, CACHED_CODE, FREE_CODE,
                owner_code(3, partial=1), FREE_CODE, CACHED_CODE, FREE_CODE, FREE_CODE]
    assert flat[:10].tolist() == [int(c) for c in expected]
    assert (flat[10:] == PAD).all()
    # the colours a user sees
    assert hex_of(flat[0]) == SEQ_COLORS[3] and hex_of(flat[1]) == SEQ_COLORS[7]
    assert len({hex_of(c) for c in (FREE_CODE, CACHED_CODE, SHARED_CODE, flat[0], flat[5])}) == 5
    # hover names the block, its owners (with the logical index), ref count and fill
    row, col = divmod(2, cols)
    assert grid.block_at(col + 0.5, row + 0.5) == 2
    text = describe_block(pool, 2)
    assert "block 2" in text and "a[1]" in text and "b[1]" in text and "ref 2" in text
    assert "4/4 tokens" in text
    assert "cached-free" in describe_block(pool, 3) and "free" in describe_block(pool, 9)
    assert grid.block_at(cols - 0.5, rows - 0.5) is None or rows * cols == 10


def test_selection_highlights_exactly_that_sequences_blocks():
    pool = hand_pool()
    for selected, table in ((0, {0, 2, 5}), (1, {1, 2})):
        codes = block_codes(pool, np.array([0, 1]), selected)
        undimmed = set()
        for b, code in enumerate(codes.tolist()):
            if code >= 16 and ((code - 16) // 2) % 2 == 0 or code == SHARED_CODE:
                undimmed.add(b)
        assert undimmed == table
        for b in set(range(10)) - table:
            assert codes[b] in (FREE_DIM, CACHED_DIM, SHARED_DIM) or ((codes[b] - 16) // 2) % 2
    # no selection: nothing dimmed
    codes = block_codes(pool, np.array([0, 1]))
    assert not set(codes.tolist()) & {FREE_DIM, CACHED_DIM, SHARED_DIM}


def test_address_line_codes():
    regions = (ContiguousRegion("a", 0, 8, 3), ContiguousRegion("b", 10, 8, 8))
    codes = address_codes(20, regions, [(8, 2), (18, 2)], max_seq_len=8, colors={"a": 0, "b": 1})
    assert codes.tolist() == ([int(owner_code(0))] * 3 + [int(owner_code(0, 1))] * 5
                              + [EXTERNAL_CODE] * 2 + [int(owner_code(1))] * 8
                              + [EXTERNAL_CODE] * 2)
    wide = address_codes(1_000_000, (ContiguousRegion("a", 0, 500_000, 250_000),),
                         [(500_000, 500_000)], 400_000, {"a": 2})
    assert wide.shape == (4096,) and wide[0] == owner_code(2) and wide[-1] == FREE_CODE


def test_a_100k_block_grid_draws(qtbot):
    pool = synthetic_pool(100_000, n_requests=1500)
    grid = KVGridPlot()
    qtbot.addWidget(grid)
    grid.resize(900, 500)
    grid.show()
    colors = np.arange(len(pool.seq_ids))
    grid.draw(pool, colors)
    grid.viewport().repaint()
    drawn = []
    for k in range(5):
        grid.draw(pool, colors, None if k % 2 else 3)
        grid.viewport().repaint()
        assert np.array_equal(grid.image_item.image, grid.image)  # reached the one ImageItem
        drawn.append(grid.image.copy())
    rows, cols = grid.image.shape
    assert rows * cols >= 100_000 and grid.codes.shape == (100_000,)
    assert 1.2 < cols / rows < 3.5  # wrapped to the widget's shape, cells square
    assert not grid.id_items and not grid.border_item.xData.size  # no per-cell items
    # Each update drew the cells anew: the selection toggle shows, and comes back exactly
    # (its time is `grid_render_ms_100k` in `inferlab bench kv`).
    assert not np.array_equal(drawn[0], drawn[1])
    assert np.array_equal(drawn[0], drawn[2]) and np.array_equal(drawn[1], drawn[3])
    counts = np.bincount(pool.state, minlength=4)
    assert counts[USED] and counts[SHARED] and counts[CACHED_FREE]



def test_lab_steps_exports_and_reopens_read_only(qtbot, make_window, tmp_path):
    from inferlab.app.labs.kv import AUTO_STEPS

    window = make_window()
    window.show_lab("kv")
    lab = window.lab("kv")
    qtbot.waitUntil(lambda: lab.session is not None, timeout=60000)
    wait_idle(qtbot, window)
    assert lab.info.model_id == "tiny" and lab.info.scenario == "shared-prompt"
    assert len(lab.records) == AUTO_STEPS
    lab.view.step_button.click()
    qtbot.waitUntil(lambda: len(lab.records) == AUTO_STEPS + 1, timeout=30000)
    wait_idle(qtbot, window)
    window.activateWindow()
    lab.view.slider.setFocus()
    qtbot.keyClick(lab.view.slider, Qt.Key_N)  # the Step shortcut
    qtbot.waitUntil(lambda: len(lab.records) == AUTO_STEPS + 2, timeout=30000)
    wait_idle(qtbot, window)
    lab.flush()
    view = lab.view
    last = lab.records[-1]
    assert view.records[-1] is last and view.grid.pool is last.pool
    assert view.seq_table.rowCount() == len(last.seqs)
    assert view.selected is not None  # the first opening selects a prefix-hit sequence
    assert "prefix-cache hit rate" in view.stats_line.text()
    # select by clicking the table: the grid dims everything but that sequence's blocks
    view.select("r0")
    table = last.pool.block_tables[last.pool.seq_ids.index("r0")]
    assert view.block_table.rowCount() == len(table)
    assert int(view.block_table.item(0, 1).text()) == table[0]

    path = window.export_snapshot(tmp_path / "kv.json")
    raw = json.loads(path.read_text())
    section = raw["inferlab"]["labs"]["kv"]
    assert len(section["state"]["steps"]) == AUTO_STEPS + 2
    assert section["metrics"]["prefix_hit_rate"] > 0
    names = [e.get("name", "") for e in raw["traceEvents"]]
    assert any(n.startswith("KV lab") for n in names)  # the worker tasks
    assert sum(n.startswith("kv step") for n in names) == AUTO_STEPS + 2

    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    replay = other.lab("kv")
    assert replay.read_only and not replay.view.step_button.isEnabled()
    shown = replay.view.records
    assert [r.step for r in shown] == [r.step for r in lab.records]
    assert shown[-1].paged == last.paged
    assert np.array_equal(replay.view.grid.pool.state, last.pool.state)
    assert replay.view.seq_table.rowCount() == len(last.seqs)
    replay.view.slider.setValue(0)  # replay an earlier step
    assert replay.view.index == 0 and replay.view.grid.pool.n_blocks == lab.info.n_blocks
    other.show_live()
    assert not replay.read_only


def test_a_new_scenario_is_one_click(qtbot, make_window):
    window = make_window()
    window.show_lab("kv")
    lab = window.lab("kv")
    qtbot.waitUntil(lambda: lab.session is not None, timeout=60000)
    wait_idle(qtbot, window)
    view = lab.view
    view.scenario.setCurrentIndex(view.scenario.findData("fork"))
    qtbot.waitUntil(lambda: lab.session is not None and lab.session.done, timeout=60000)
    wait_idle(qtbot, window)
    lab.flush()
    assert lab.info.scenario == "fork" and lab.settings()["scenario"] == "fork"
    assert any("copy-on-write" in e for r in lab.records for e in r.events)
    assert "Finished after" in view.status.text()


def test_run_kv_cli_writes_a_snapshot_the_window_opens(capsys, tmp_path, make_window):
    from inferlab.app.cli import main
    from inferlab.engines.trace.snapshot import read_snapshot

    out = tmp_path / "kv.json"
    assert main(["run", "kv", "--model", "tiny", "--scenario", "shared-prompt", "--snapshot",
                 str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    metrics = printed["metrics"]
    assert printed["lab"] == "kv" and metrics["prefix_hit_rate"] > 0.5
    assert metrics["finished"] == 8 and metrics["refused"] == 0
    snapshot = read_snapshot(out)
    assert snapshot.active_lab == "kv"
    read = read_kv_section(snapshot.labs["kv"])
    records = read.steps
    assert read.settings["scenario"] == "shared-prompt" and read.run.model_id == "tiny"
    assert len(read.sequences) == 8 and len(records) == metrics["steps"]
    assert sum(1 for e in snapshot.trace_events if e.get("name", "").startswith("kv step")) \
        == len(records)

    window = make_window()
    window.open_snapshot(out)
    lab = window.lab("kv")
    assert lab.read_only and window.current_lab() is lab
    assert len(lab.view.records) == len(records)

    assert main(["run", "kv", "--model", "tiny", "--scenario", "nope", "--snapshot",
                 str(out)]) == 2
    assert "unknown scenario 'nope'" in capsys.readouterr().err
    assert main(["run", "kv", "--model", "tiny", "--scenario", "pressure", "--blocks", "40",
                 "--block-size", "8", "--snapshot", str(out), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["refused"] == 1 and metrics["finished"] == 10


def test_bad_kv_sections_name_the_field():

    with pytest.raises(ValueError, match="labs.kv: missing field 'settings'"):
        read_kv_section({})
    empty = read_kv_section({"settings": {}, "state": {}})
    assert empty.run is None and empty.sequences == () and empty.steps == ()
    assert empty.settings == KV_DEFAULTS
    bad = {"settings": {}, "state": {"run": {"scenario": "x"}, "sequences": [], "steps": []}}
    with pytest.raises(ValueError, match="labs.kv.state.run: missing field"):
        read_kv_section(bad)


def test_a_big_runs_snapshot_keeps_some_pools_and_replays_them(qtbot, monkeypatch):
    from inferlab.engines.labs.kv.session import KVLabSession
    from inferlab.engines.model.tiny import tiny_model
    from inferlab.views.kv_view import KVView

    session = KVLabSession(*tiny_model(), "fork")
    records = session.run()
    monkeypatch.setattr(kvlab_section, "KV_POOL_CELLS_LIMIT", session.n_blocks * 10)
    sec = kv_section(dict(KV_DEFAULTS), session.info, session.seq_infos(),
                              records)
    kept = [i for i, s in enumerate(sec["state"]["steps"]) if s["pool"] is not None]
    every = sec["state"]["pool_every"]
    assert every > 1 and kept[:2] == [0, every] and kept[-1] == len(records) - 1
    read = read_kv_section(json.loads(json.dumps(sec)))
    replay = read.steps
    view = KVView()
    qtbot.addWidget(view)
    view.draw(read.run, read.sequences, replay)
    view.slider.setValue(every + 1)
    assert view.grid.pool is replay[every].pool
    assert f"as of step {every}" in view.grid_title.text()
    assert [r.paged for r in replay] == [r.paged for r in records]


def test_the_prefix_tree_tab_draws_a_radix_run_and_names_hovered_nodes(qtbot):
    """Multi-turn with the radix cache on the tiny model: the tree tab opens on the first
    radix step, its bars are the tree's nodes, a turn that hit is outlined, and hovering a bar
    names that node's tokens."""
    from inferlab.views.kv_view import KVView

    settings = dict(KV_DEFAULTS, model="tiny", scenario="multi-turn", prefix_cache="radix")
    session, records = kv_run(settings, max_steps=18)
    view = KVView()
    qtbot.addWidget(view)
    view.draw(session.info, session.seq_infos(), records)
    assert view.tabs.currentIndex() == 1
    state = view.tree.state
    assert state is records[-1].radix and state.n_nodes >= 2
    hit_step = next(i for i, r in enumerate(records)
                    if any(q.seq_id == "c0t1" and q.n_cached for q in r.seqs))
    view.show_step(hit_step)
    bars = [item for item in view.tree.getPlotItem().items if hasattr(item, "opts")
            and "pens" in item.opts]
    assert bars and any(p.width() == 3 for p in bars[0].opts["pens"])  # outlined: just hit
    state, i = view.tree.state, 0
    x, y = state.start[i] + 0.5, view.tree._rows[0][i] + 0.5
    assert view.tree.node_at(x, y) == i
    view.tree.decode = lambda ids: "decoded!"
    assert "decoded!" in view.tree.hover_text(i) and f"node {state.node_id[i]}" in \
        view.tree.hover_text(i)
    # a hash run has no tree: the tab says how to get one
    settings["prefix_cache"] = "hash"
    session, records = kv_run(settings, max_steps=2)
    view.draw(session.info, session.seq_infos(), records)
    assert view.tree.state is None


def test_the_kv_views_prefix_choice_carries_the_eviction_order(qtbot):
    from inferlab.views.kv_view import KVView

    view = KVView()
    qtbot.addWidget(view)
    for cache, order, want in (("radix", "fifo", "fifo"), ("radix", "lfu", "lfu"),
                               ("hash", "fifo", "lru"), ("none", "lfu", "lru")):
        view.set_settings(dict(KV_DEFAULTS, prefix_cache=cache, eviction_policy=order))
        got = view.settings()
        assert (got["prefix_cache"], got["eviction_policy"]) == (cache, want)


def test_a_headless_runs_section_reads_into_a_frozen_record_the_lab_draws(qtbot, make_window):
    """`inferlab run kv`'s section (through JSON) reads once into a `KVSnapshot`, equal field
    by field to the run's own records, frozen; `show_snapshot` draws that record."""
    import dataclasses

    from inferlab.engines.labs.kv.records import KVSnapshot

    settings = dict(KV_DEFAULTS, model="tiny", scenario="fork")
    session, records = kv_run(settings, max_steps=5)
    sec = json.loads(json.dumps(kv_section(settings, session.info, session.seq_infos(),
                                           records)))
    read = read_kv_section(sec)
    assert isinstance(read, KVSnapshot)
    assert read.settings == settings and read.run == session.info
    assert read.sequences == session.seq_infos()
    assert isinstance(read.steps, tuple) and [r.step for r in read.steps] == [0, 1, 2, 3, 4]
    assert [(r.paged, r.contiguous, r.seqs, r.events) for r in read.steps] == \
        [(r.paged, r.contiguous, r.seqs, r.events) for r in records]
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.steps = ()

    window = make_window()
    lab = window.lab("kv")
    lab.show_snapshot(read)
    assert lab.read_only and [r.step for r in lab.view.records] == [0, 1, 2, 3, 4]
    assert np.array_equal(lab.view.grid.pool.state, records[-1].pool.state)
    assert lab.view.status.text().startswith("Read-only snapshot: 5 steps of")
