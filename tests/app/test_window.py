"""The main window, offscreen: every lab opens, devices switch, snapshots and views export."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from PySide6.QtGui import QImage

from inferlab.app.labs import LAB_IDS
from tests.app.lab_helpers import wait_idle


def test_every_lab_opens(make_window):
    window = make_window()
    assert [window.sidebar.item(i).data(0x0100) for i in range(window.sidebar.count())] == list(LAB_IDS)
    for row, lab in enumerate(window.labs):
        window.sidebar.setCurrentRow(row)
        assert window.stack.currentWidget() is lab.widget
        assert lab.widget.isVisible()
    window.context.cancel_tasks()


def test_lab_ids_are_the_designed_ones():
    assert LAB_IDS[:3] == ("hardware", "roofline", "memory")


def test_device_bar_lists_cpu_and_switches(make_window):
    window = make_window()
    ids = [window.device_combo.itemData(i) for i in range(window.device_combo.count())]
    assert ids[0] == "cpu"
    seen = []
    window.context.device_changed.connect(seen.append)
    if len(ids) > 1:
        window.device_combo.setCurrentIndex(1)
        assert seen == [ids[1]] and window.context.device_id == ids[1]
        window.device_combo.setCurrentIndex(0)
    else:
        window.context.set_device("cpu")  # no change, no signal
        assert seen == []
    assert window.context.device_id == "cpu"
    with pytest.raises(ValueError, match="unknown device 'cuda:7'"):
        window.context.set_device("cuda:7")
    assert "no board" in window.board_label.text()


def test_roofline_lab_measures_in_background_and_plots(qtbot, make_window):
    window = make_window()
    window.show_lab("roofline")
    qtbot.waitUntil(lambda: window.context.roofs() is not None, timeout=60000)
    wait_idle(qtbot, window)
    lab = window.lab("roofline")
    scene = lab.view.plot.scene_record
    assert scene.roofs[0].measured and scene.roofs[0].peak_flops > 0
    assert any(p.measured for p in scene.points)
    assert any(not p.measured for p in scene.points)
    assert "knee" in lab.view.formula.text()


def test_snapshot_export_and_open_again(qtbot, make_window, tmp_path):
    window = make_window()
    window.show_lab("roofline")
    qtbot.waitUntil(lambda: window.context.roofs() is not None, timeout=60000)
    wait_idle(qtbot, window)
    path = window.export_snapshot(tmp_path / "snap.json")
    raw = json.loads(path.read_text())
    assert list(raw)[:2] == ["displayTimeUnit", "traceEvents"]
    assert set(raw["inferlab"]["labs"]) >= {"hardware", "roofline", "memory"}
    assert any(e["ph"] == "X" and e["name"].startswith("Measuring roofline") for e in raw["traceEvents"])

    other = make_window(str(tmp_path / "other.ini"))
    other.open_snapshot(path)
    assert other.banner.isVisible() and "snap.json" in other.banner_label.text()
    for lab_id in ("hardware", "roofline", "memory"):
        assert other.lab(lab_id).read_only
    replayed = other.lab("roofline").view.plot.scene_record
    live = window.lab("roofline").view.plot.scene_record
    assert replayed.roofs[0].peak_flops == pytest.approx(live.roofs[0].peak_flops)
    assert len(replayed.points) == len(live.points)
    memory_rows = other.lab("memory").view.results
    assert memory_rows.item(0, 1).text() == window.lab("memory").view.results.item(0, 1).text()
    assert not other.lab("memory").view.batch.isEnabled()
    other.show_live()
    assert not other.banner.isVisible() and not other.lab("memory").read_only


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ('{"displayTimeUnit": "ms", "traceEv', "truncated or not JSON"),
    ('{"displayTimeUnit": "ms", "traceEvents": [], "inferlab": {"schema": "inferlab.snapshot/9"}}', "newer"),
])
def test_bad_snapshot_is_refused_and_nothing_changes(make_window, tmp_path, content, message):
    window = make_window()
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(ValueError, match=message):
        window.open_snapshot(bad)
    assert not window.banner.isVisible()
    assert not any(lab.read_only for lab in window.labs)


def test_snapshot_with_a_broken_lab_section_opens_the_rest(make_window, tmp_path):
    window = make_window()
    path = window.export_snapshot(tmp_path / "snap.json")
    data = json.loads(path.read_text())
    del data["inferlab"]["labs"]["memory"]["state"]["model_config"]
    path.write_text(json.dumps(data))
    window.open_snapshot(path)
    assert set(window.snapshot_problems) == {"memory"}
    assert "model_config" in window.snapshot_problems["memory"]
    assert "Not shown: memory" in window.banner_label.text()
    assert not window.lab("memory").read_only
    assert all(lab.read_only for lab in window.labs if lab.lab_id != "memory")


def test_snapshot_whose_every_section_is_broken_changes_nothing(make_window, tmp_path):
    window = make_window()
    path = window.export_snapshot(tmp_path / "snap.json")
    data = json.loads(path.read_text())
    data["inferlab"]["labs"] = {"memory": {"settings": {}, "state": {}, "metrics": {}}}
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="labs.memory.state: missing field 'model_config'"):
        window.open_snapshot(path)
    assert not any(lab.read_only for lab in window.labs)
    assert not window.banner.isVisible()


def test_export_view_png_and_svg(make_window, tmp_path):
    window = make_window()
    window.show_lab("memory")
    png = window.export_view(tmp_path / "memory.png")
    image = QImage(str(png))
    assert not image.isNull() and image.width() > 200 and image.height() > 200
    svg = window.export_view(tmp_path / "memory.svg")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert "KV bytes per token" in svg.read_text()
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        window.export_view(tmp_path / "memory.bmp")


def test_pyqtgraph_svg_exporter_works_with_pinned_qt(make_window, tmp_path):
    """pyqtgraph 0.14's SVGExporter breaks on PySide6 >= 6.11 (pyqtgraph #3495): pin holds."""
    import pyqtgraph.exporters as exporters

    window = make_window()
    window.show_lab("memory")
    plot = window.lab("memory").view.budget_plot.getPlotItem()
    out = tmp_path / "budget.svg"
    exporters.SVGExporter(plot).export(str(out))
    assert ET.parse(out).getroot().tag.endswith("svg")


def test_settings_remember_lab_geometry_and_inputs(make_window, settings_path):
    window = make_window()
    window.show_lab("memory")
    window.lab("memory").view.batch.setValue(7)
    window.resize(900, 640)
    assert window.height() == 640
    window.close()
    again = make_window(settings_path)
    assert again.current_lab().lab_id == "memory"
    assert again.lab("memory").view.batch.value() == 7
    # Height only: Qt clamps a restored width to the offscreen screen (800 px wide).
    assert again.height() == 640


def test_about_names_versions(make_window):
    from PySide6.QtCore import qVersion

    text = make_window().about_text()
    assert qVersion() in text and "torch" in text and "CUDA" in text


def test_snapshot_settings_out_of_range_are_reported_not_drawn(make_window, tmp_path):
    window = make_window()
    path = window.export_snapshot(tmp_path / "snap.json")
    data = json.loads(path.read_text())
    data["inferlab"]["labs"]["memory"]["settings"]["context"] = 10**30
    data["inferlab"]["labs"]["roofline"]["settings"]["presets"] = ["no-such-gpu"]
    path.write_text(json.dumps(data))
    window.open_snapshot(path)
    assert "labs.memory.settings.context: expected an integer in 1..10,000,000" in \
        window.snapshot_problems["memory"]
    assert "labs.roofline.settings.presets" in window.snapshot_problems["roofline"]
    assert window.lab("hardware").read_only and not window.lab("memory").read_only
