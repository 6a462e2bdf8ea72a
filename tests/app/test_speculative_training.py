"""The speculative lab's Training tab: it shows the head the lab's drafter would read (the
shipped one, said so, where the model has none), trains a head for the tiny model in a
worker with its curve streamed onto the plots, stops on Cancel with nothing saved, and
shows a training error instead of raising it; `inferlab screenshot --tab Training` shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab.app.cli import main
from inferlab.app.labs import speculative_training
from inferlab.app.offscreen_window import select_tab
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.head_file import load_head, read_record
from inferlab.engines.speculative.heads.shipped import shipped_head_path
from inferlab.engines.speculative.heads.train import TrainSettings
from tests.app import lab_helpers
from tests.app.lab_helpers import wait_idle

QUICK = TrainSettings(max_new_tokens=8, max_text_tokens=64, draft_vocab_size=64)
"""A run of seconds on the tiny model: short answers, short texts, a small draft vocabulary."""


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """The user cache (heads, features) in a folder of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "inferlab"


def _training_tab(qtbot, make_window):
    window, lab = lab_helpers.open_lab(qtbot, make_window, "speculative", 120000,
                                       model="tiny", max_tokens=16)
    lab.tabs.setCurrentWidget(lab.training.panel)
    qtbot.waitUntil(lambda: bool(lab.training.found), timeout=60000)
    wait_idle(qtbot, window)
    lab.training.train_base = QUICK
    return window, lab, lab.training.panel


def _curve_y(item) -> list[float]:
    y = item.getData()[1]
    return [] if y is None else [float(v) for v in y]


def test_the_tab_shows_the_shipped_head(qtbot, make_window, cache):
    window, lab, panel = _training_tab(qtbot, make_window)
    shipped = shipped_head_path("eagle")
    record = read_record(shipped)
    assert lab.training.found == {"eagle": None, "medusa": None}  # none for tiny
    assert panel.record == record
    assert "shown is the one shipped for another model" in panel.status.text()
    assert _curve_y(panel.tokens_plot.head) == [p["tokens_per_forward"]
                                               for p in record["training"]["curve"]]
    facts = {panel.facts.item(r, 0).text(): panel.facts.item(r, 1).text()
             for r in range(panel.facts.rowCount())}
    assert facts["Training tokens"] == f"{record['training']['train_tokens']:,}"
    assert facts["File size"] == f"{shipped.stat().st_size / 1e6:,.1f} MB"
    panel.kind.setCurrentIndex(panel.kind.findData("medusa"))  # none ships
    assert panel.record is None and "no Medusa heads yet" in panel.status.text()


def test_train_streams_the_curve_and_saves_the_head(qtbot, make_window, cache,
                                                    few_training_prompts):
    window, lab, panel = _training_tab(qtbot, make_window)
    before = list(panel.points)
    streamed, progress = [], []
    lab.training.point_ready.connect(lambda _run, p: streamed.append(p))
    lab.training.progress_ready.connect(lambda *a: progress.append(a[1:]))
    panel.epochs.setValue(2)
    panel.train_button.click()
    assert panel.cancel_button.isEnabled() and not panel.train_button.isEnabled()
    qtbot.waitUntil(lambda: lab.training.last_build is not None, timeout=120000)
    wait_idle(qtbot, window)
    path, record, size = lab.training.last_build
    assert Path(path).is_relative_to(cache / "heads")
    assert Path(path).stat().st_size == size
    assert [p["epoch"] for p in streamed] == [0, 1, 2]
    assert record["training"]["curve"] == streamed  # what streamed is what was saved
    assert panel.record == record and panel.points == streamed
    assert panel.earlier == before  # the shipped head's curve, dashed beside it
    assert _curve_y(panel.tokens_plot.head) == [p["tokens_per_forward"] for p in streamed]
    assert {stage for stage, *_ in progress} == {"generate", "train"}
    assert progress[-1][1] == progress[-1][2]  # the last step of a stage always reported
    assert "Trained the EAGLE head for tiny" in panel.status.text()
    assert panel.train_button.isEnabled() and not panel.cancel_button.isEnabled()
    head = load_head(Path(path), tiny_model()[0])
    assert head.kind == "eagle" and head.vocab.size == 64
    # the tab now finds it where the lab's drafter does: the user cache
    panel.kind.setCurrentIndex(panel.kind.findData("medusa"))
    panel.kind.setCurrentIndex(panel.kind.findData("eagle"))
    qtbot.waitUntil(lambda: "trained in the user cache" in panel.status.text(), timeout=60000)
    wait_idle(qtbot, window)
    assert panel.record == record and panel.earlier == []


def test_cancel_stops_it_and_saves_nothing(qtbot, make_window, cache):
    # the whole training list (no few_training_prompts): the run must outlast the first report
    window, lab, panel = _training_tab(qtbot, make_window)
    shown = panel.record
    lab.training.progress_ready.connect(lambda *_a: panel.cancel_button.click())
    panel.train_button.click()
    wait_idle(qtbot, window, 120000)
    assert panel.status.text() == "Training cancelled: nothing was saved."
    assert lab.training.last_build is None
    assert not list(cache.glob("heads/*/eagle.safetensors"))
    assert panel.train_button.isEnabled() and not panel.cancel_button.isEnabled()
    # the head shown before comes back when the tab is shown again
    lab.training.show_head()
    wait_idle(qtbot, window)
    assert panel.record == shown


def test_an_error_is_shown_not_raised(qtbot, make_window, cache, monkeypatch):
    window, lab, panel = _training_tab(qtbot, make_window)

    def fails(*_a, **_k):
        raise SpeculativeError("the training data is empty")

    monkeypatch.setattr(speculative_training, "train_head", fails)
    panel.train_button.click()
    wait_idle(qtbot, window)
    assert panel.status.text() == "Training failed: the training data is empty"
    assert "B71C1C" in panel.status.styleSheet()
    assert panel.train_button.isEnabled()
    lab.training.train_base = TrainSettings(lr=-1.0)  # refused before any work starts
    panel.train_button.click()
    assert "Cannot train: lr must be" in panel.status.text()
    assert not window.context.running_tasks()


def test_select_tab_by_name(qtbot):
    from PySide6.QtWidgets import QTabWidget, QWidget

    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    tabs.addTab(QWidget(), "Decode")
    tabs.addTab(QWidget(), "&Training")
    select_tab(tabs, "training")
    assert tabs.currentIndex() == 1
    with pytest.raises(ValueError, match="its tabs: Decode, Training"):
        select_tab(tabs, "Trace")


def test_screenshot_tab_needs_one_lab(capsys):
    assert main(["screenshot", "--lab", "all", "--tab", "Training", "--out", "x"]) == 2
    assert "--tab" in capsys.readouterr().err


@pytest.mark.slow  # a whole-window screenshot
def test_screenshot_of_the_training_tab(tmp_path, cache):
    from PySide6.QtGui import QImage

    png = tmp_path / "training.png"
    assert main(["screenshot", "--lab", "speculative", "--tab", "Training", "--out",
                 str(png)]) == 0
    image = QImage(str(png))
    assert (image.width(), image.height()) == (1280, 800)


@pytest.mark.slow  # SmolLM2 loaded by the lab
def test_smollm2_shows_its_shipped_head(qtbot, make_window, cache):
    from inferlab.engines.model.cache import smollm2_available

    if not smollm2_available():
        pytest.skip("SmolLM2-135M is not installed")
    window, lab = lab_helpers.open_lab(qtbot, make_window, "speculative", 240000,
                                       model="smollm2-135m", max_tokens=8)
    lab.tabs.setCurrentWidget(lab.training.panel)
    qtbot.waitUntil(lambda: bool(lab.training.found), timeout=120000)
    wait_idle(qtbot, window)
    shipped = shipped_head_path("eagle")
    assert lab.training.found["eagle"][0] == str(shipped)  # what the EAGLE drafter reads
    assert lab.training.panel.record == read_record(shipped)
    assert "shipped with InferLab" in lab.training.panel.status.text()
