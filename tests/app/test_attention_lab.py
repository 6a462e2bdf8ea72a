"""The attention lab: the window shows it, it steps one tile and runs to the end, the count
equals the closed form, a snapshot reopens read-only, and `inferlab screenshot` renders."""

from __future__ import annotations

import json

import pytest

from inferlab.app.benches.attention_view import redraw_ms
from inferlab.app.labs.attention import AUTO_STEPS
from tests.app import lab_helpers
from tests.app.lab_helpers import wait_idle


def test_lab_steps_runs_exports_and_reopens_read_only(qtbot, make_window, tmp_path):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "attention", n=96, d=8, br=16,
                                       bc=32, causal=True)
    assert len(lab.records) == AUTO_STEPS
    lab.view.step_button.click()
    qtbot.waitUntil(lambda: len(lab.records) == AUTO_STEPS + 1, timeout=30000)
    wait_idle(qtbot, window)
    lab.view.run_button.click()
    qtbot.waitUntil(lambda: lab.session.done, timeout=60000)
    wait_idle(qtbot, window)
    lab.flush()
    form = lab.header.info.closed_forms["tiled"]
    last = lab.records[-1]
    assert (last.bytes_read, last.bytes_written) == (form.bytes_read, form.bytes_written)
    assert [r.step for r in lab.records] == list(range(last.steps_total))
    assert "the closed form's exactly" in lab.view.status.text()

    path = window.export_snapshot(tmp_path / "attention.json")
    section = json.loads(path.read_text())["inferlab"]["labs"]["attention"]
    assert len(section["state"]["steps"]) == len(lab.records)
    assert section["metrics"]["bytes_read"] == form.bytes_read
    window2 = make_window()
    window2.open_snapshot(path)
    replay = window2.lab("attention")
    assert replay.read_only and len(replay.view.steps) == len(lab.records)
    assert not replay.view.step_button.isEnabled()
    assert replay.view.header.roofs == lab.header.roofs  # placed on the same roofs


def test_changing_a_setting_starts_again(qtbot, make_window):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "attention", n=64, d=8, br=16,
                                       bc=16)
    lab.view.set_settings(dict(lab.settings(), execution="naive"))
    lab.view._emit()
    qtbot.waitUntil(lambda: lab.session is not None and lab.header.info.execution == "naive",
                    timeout=30000)
    wait_idle(qtbot, window)
    assert lab.records and all(r.execution == "naive" for r in lab.records)


def test_redraw_of_a_4096_run_measures(qtbot):
    assert redraw_ms(n=256, steps=4) > 0  # the bench's figure, on a small run


@pytest.mark.slow  # a whole-window screenshot
def test_screenshot_of_the_lab(tmp_path):
    from inferlab.app.cli import main

    png = tmp_path / "attention.png"
    assert main(["screenshot", "--lab", "attention", "--out", str(png)]) == 0
    assert png.stat().st_size > 10_000


# ---- the snapshot fuzz of tests/app/test_snapshot_fuzz.py, on this lab's section ---------------
# (its BUILDERS and CASES tables, in files this lab does not own, need the two lines
#  "attention": attention_section_sample and "attention": 150 to cover it there too)
def attention_section_sample() -> dict:
    """A small real section: a causal tiled run of 15 tiles (1 + 2 + … + 5), two timing rows."""
    from inferlab.engines.labs.attention.section import attention_section
    from inferlab.engines.labs.attention.session import AttentionSession
    from inferlab.engines.labs.attention.settings import ATTENTION_DEFAULTS
    from inferlab.engines.trace.jsonable import to_jsonable

    settings = dict(ATTENTION_DEFAULTS, n=40, d=4, br=8, bc=8, causal=True)
    s = AttentionSession(settings)
    records = [s.step() for _ in range(s.engine.steps_total)]
    rows = [{"n": 256, "naive_sp_bytes": 524288, "naive_s": 2e-4, "sdpa_s": 2e-4,
             "tiled_torch_s": 3e-4},
            {"n": 512, "naive_sp_bytes": 2097152, "naive_s": None, "naive_error":
             "out of memory", "sdpa_s": 8e-4, "tiled_torch_s": 9e-4}]
    return json.loads(json.dumps(to_jsonable(attention_section(settings, s.info, records,
                                                               rows)), allow_nan=False))


def test_a_mutated_section_opens_or_is_refused_by_name(make_window, qtbot):
    import random
    import traceback

    from inferlab.app import snapshot_io
    from inferlab.engines.trace.snapshot import Snapshot
    from tests.fuzz import mutate_value, run_cases, sampled_paths

    section = attention_section_sample()
    lab = make_window().lab("attention")

    def opening(mutated):
        snapshot = Snapshot(app_version="0.0", created_utc="2025-06-18T00:00:00+00:00",
                            host={}, devices=(), active_lab="attention",
                            labs={"attention": mutated})

        def call():
            with qtbot.capture_exceptions() as errors:
                snapshot_io.restore_labs([lab], snapshot)
                lab.widget.grab()
            if errors:
                raise RuntimeError("".join(traceback.format_exception(*errors[0])))
        return call

    opening(section)()
    assert lab.read_only and len(lab.view.steps) == 15
    rng = random.Random("20250618:attention")
    paths = sampled_paths(section)
    result = run_cases(((label, opening(mutated)) for label, mutated in
                        (mutate_value(section, rng, paths) for _ in range(150))), (ValueError,))
    result.check()
    assert result.cases == 150 and result.refused > 0 and result.ok > 0


def test_a_model_layer_as_the_source(qtbot, make_window):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "attention", source="tiny",
                                       layer=0, n=48, br=16, bc=16, causal=True)
    info = lab.header.info
    assert "tiny layer 0" in info.source and info.n == 48
    lab.view.set_settings(lab.settings())  # open_lab set the lab's settings, not the view's
    assert not lab.view.spins["d"].isEnabled() and lab.view.layer.isEnabled()
    assert lab.records and lab.records[-1].execution == "tiled"


def test_timings_are_measured_drawn_and_kept_in_the_snapshot(qtbot, make_window, monkeypatch,
                                                             tmp_path):
    from inferlab.engines.labs.attention import bench

    real = bench.timings
    monkeypatch.setattr(bench, "timings", lambda progress=None, device="cpu":
                        real((64, 128), d=8, repeats=1, progress=progress, device=device))
    window, lab = lab_helpers.open_lab(qtbot, make_window, "attention", n=32, d=8, br=8, bc=8)
    lab.view.timings.button.click()
    qtbot.waitUntil(lambda: len(lab.timing_rows) == 2 or "failed" in lab.view.timings.note.text(),
                    timeout=30000)
    assert lab.timing_rows, lab.view.timings.note.text()
    wait_idle(qtbot, window)
    assert [r["n"] for r in lab.timing_rows] == [64, 128]
    assert len(lab.view.timings.item.listDataItems()) >= 3  # naive, SDPA, tiled torch (+ C)
    section = json.loads(window.export_snapshot(tmp_path / "a.json").read_text())
    assert [r["n"] for r in section["inferlab"]["labs"]["attention"]["state"]["timings"]] == \
        [64, 128]


def test_run_attention_json_on_the_command_line(capsys, tmp_path):
    from inferlab.app.cli import main
    from inferlab.engines.attention.traffic import tiled_traffic

    snap = tmp_path / "run.json"
    assert main(["run", "attention", "--n", "100", "--d", "16", "--br", "32", "--bc", "16",
                 "--causal", "--snapshot", str(snap), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["element_bytes"] == 4
    assert set(metrics["executions"]) == {"naive", "tiled", "split_k"}
    tiled = metrics["executions"]["tiled"]
    form = tiled_traffic(100, 16, 32, 16, True, 4)
    assert (tiled["bytes_read"], tiled["bytes_written"]) == (form.bytes_read, form.bytes_written)
    assert all(e["max_abs_error_vs_sdpa"] < 1e-5 and e["steps"] > 0
               for e in metrics["executions"].values())
    assert json.loads(snap.read_text())["inferlab"]["labs"]["attention"]["state"]["steps"]


def test_a_refused_run_says_why_in_the_status_line(qtbot, make_window):
    window = make_window()
    lab = window.lab("attention")
    lab._settings = lab._settings | {"n": 16384, "d": 4, "br": 1, "bc": 1}
    window.show_lab("attention")
    qtbot.waitUntil(lambda: "over the lab's" in lab.view.status.text(), timeout=30000)
    wait_idle(qtbot, window)
    assert lab.session is None and "choose larger tiles" in lab.view.status.text()


def test_a_section_reads_into_a_frozen_record_the_lab_draws(make_window):
    """A headless run's section (15 tiles, two timing rows, no roofs kept) reads once into an
    `AttentionSnapshot`; `show_snapshot` draws its steps and timings and places the run on the
    datasheet GPU roof."""
    import dataclasses

    from inferlab.app.labs.attention import gpu_roof
    from inferlab.engines.labs.attention.records import AttentionSnapshot
    from inferlab.engines.labs.attention.section import read_attention_section

    read = read_attention_section(attention_section_sample())
    assert isinstance(read, AttentionSnapshot)
    assert (read.run.n, read.run.d, read.run.causal) == (40, 4, True)
    assert [r.step for r in read.steps] == list(range(15)) and read.roofs == ()
    assert [r["n"] for r in read.timings] == [256, 512]
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.timings = ()
    lab = make_window().lab("attention")
    lab.show_snapshot(read)
    assert lab.read_only and list(lab.view.steps) == list(read.steps)
    assert lab.view.header.roofs == (gpu_roof(),)
    assert len(lab.view.timings.item.listDataItems()) == 3  # naive, SDPA, tiled torch
    assert lab.view.status.text().startswith("Read-only snapshot: 15 tiles of tiled attention")
