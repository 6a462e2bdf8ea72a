"""The attention view draws records it is given: tile grids with the current tiles lit, the
score tile, the bytes bars at the counted and closed-form totals, the formulas substituted."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.engines.labs.attention.session import AttentionSession
from inferlab.engines.labs.attention.settings import ATTENTION_DEFAULTS
from inferlab.views.attention_tiles import (
    CURRENT,
    SKIPPED,
    STORED,
    UNTOUCHED,
    VISITED,
    TileStates,
)
from inferlab.views.attention_traffic import MIB, formula_html, roofline_scene
from inferlab.views.attention_view import AttentionHeader, AttentionView

H100 = ("H100 fp32", 67e12, 3.35e12, False)


def run(n_steps=None, **settings):
    s = AttentionSession(dict(ATTENTION_DEFAULTS, **settings))
    records = []
    while not s.done and (n_steps is None or len(records) < n_steps):
        records.append(s.step())
    return s, records


def test_tile_states_follow_flashattention2_order_and_skip_causal_tiles():
    s, records = run(n=32, d=4, br=8, bc=8, causal=True)  # 4 Q tiles, 1+2+3+4 K tiles
    states = TileStates(s.info)
    states.advance(records, 4)  # tiles (0,0) (1,0) (1,1) (2,0) done; (2,1) is the 5th
    grid, q, k, v, o = states.lit(records[4])
    assert grid[0].tolist() == [VISITED, SKIPPED, SKIPPED, SKIPPED]
    assert grid[2].tolist() == [VISITED, CURRENT, UNTOUCHED, SKIPPED]
    assert o.tolist() == [STORED, STORED, UNTOUCHED, UNTOUCHED]
    assert q[2] == CURRENT and k[1] == CURRENT
    states.advance(records, 2)  # the slider goes back: replayed from the start
    assert states.lit(None)[4].tolist() == [STORED, UNTOUCHED, UNTOUCHED, UNTOUCHED]


def test_naive_scores_are_stored_in_main_memory():
    s, records = run(n=16, d=4, br=8, bc=8, execution="naive")
    states = TileStates(s.info)
    states.advance(records, len(records))
    grid, *_rest, o = states.lit(None)
    assert (grid == STORED).all() and (o == STORED).all()
    assert states.lit(None)[1].tolist() == [VISITED, VISITED]  # Q tiles read


@pytest.fixture
def view(qtbot):
    v = AttentionView()
    qtbot.addWidget(v)
    v.resize(1200, 760)
    return v


def test_view_draws_a_run_and_replays_an_earlier_step(view):
    s, records = run(n=64, d=8, br=16, bc=16, causal=True)
    header = AttentionHeader(s.info, (H100,))
    view.draw(header, records)
    last = records[-1]
    assert view.slider.maximum() == len(records) - 1
    assert f"step {len(records):,} of {len(records):,}" in view.step_label.text()
    heights = view.bars.counted.opts["height"]
    assert heights == [last.bytes_read / MIB, last.bytes_written / MIB]
    form = s.info.closed_forms["tiled"]
    assert last.bytes_read == form.bytes_read
    # the last tile is on the diagonal: its masked keys are drawn blank (NaN)
    expected = np.where(np.isfinite(last.score_tile), last.score_tile, np.nan)
    np.testing.assert_array_equal(view.scores.image.image, expected)
    assert np.isnan(expected).any()
    view.slider.setValue(2)
    assert "step 3 of" in view.step_label.text()
    assert view.bars.counted.opts["height"][0] == records[2].bytes_read / MIB
    x, y = view.scores.m_now.getData()
    np.testing.assert_array_equal(y, records[2].m_rows)


def test_view_settings_round_trip_and_read_only(view, qtbot):
    settings = dict(ATTENTION_DEFAULTS, n=300, br=32, causal=True, execution="split_k")
    view.set_settings(settings)
    assert {k: view.settings()[k] for k in ("n", "br", "causal", "execution")} == \
        {"n": 300, "br": 32, "causal": True, "execution": "split_k"}
    with qtbot.waitSignal(view.settings_changed) as got:
        view.causal.setChecked(False)
    assert got.args[0]["causal"] is False
    view.set_read_only(True)
    assert not view.step_button.isEnabled() and not view.spins["n"].isEnabled()


def test_formulas_show_the_numbers_substituted():
    s, records = run(n=1024, d=64, br=128, bc=128, n_steps=3)
    text = formula_html(s.info, records[-1])
    assert "⌈N/Br⌉·2Nd = 8·2·1024·64" in text
    assert "(3·1024·64 + 2·1024²)·4" in text
    assert "step 3 of 64" in text


def test_roofline_places_tiles_of_growing_size_at_growing_intensity():
    s, _ = run(n=1024, d=64, n_steps=1)
    scene = roofline_scene(s.info, (H100,))
    tiles = [p for p in scene.points if p.series.startswith("tiled, Br")]
    intensities = [p.intensity for p in tiles]
    assert intensities == sorted(intensities) and len(tiles) == 7
    knee = H100[1] / H100[2]
    assert tiles[0].intensity < knee < tiles[-1].intensity  # memory- then compute-bound


def test_naive_softmax_lights_rows_of_s_not_q_or_k():
    s, records = run(n=16, d=4, br=8, bc=8, execution="naive")
    softmax = next(i for i, r in enumerate(records) if r.phase == "softmax")
    states = TileStates(s.info)
    states.advance(records, softmax)
    grid, q, k, _v, _o = states.lit(records[softmax])
    assert grid[0].tolist() == [CURRENT, CURRENT] and CURRENT not in q and CURRENT not in k


def test_an_on_chip_preset_sets_m(view, qtbot):
    index = view.on_chip.findText("H100: shared memory per thread block")
    with qtbot.waitSignal(view.settings_changed) as got:
        view.on_chip.activated.emit(index)
    assert got.args[0]["on_chip_kib"] == 227 and view.spins["on_chip_kib"].value() == 227


def test_the_view_fits_a_small_window(view):
    """The window can be no narrower than its widest lab page: 1200 px with the sidebar."""
    assert view.minimumSizeHint().width() <= 1000
