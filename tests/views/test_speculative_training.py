"""The speculative lab's Training tab view: a head's record drawn (each plot's points are the
record's curve, the tables its data sizes and settings), a run's curve growing over the head
before it, its progress line, and the signals of its buttons."""

from __future__ import annotations

import pytest

from inferlab.engines.speculative.heads.head_file import read_record
from inferlab.engines.speculative.heads.shipped import shipped_head_path
from inferlab.views.speculative_training import TrainingPanel


def _point(epoch, loss, tokens, agreement):
    return {"epoch": epoch, "steps": 10 * epoch, "train_loss": loss,
            "tokens_per_forward": tokens, "first_token_agreement": agreement,
            "elapsed_s": 2.0 * epoch}


CURVE = [_point(0, None, 1.0, 0.0), _point(1, 0.9, 1.2, 0.15), _point(2, 0.5, 1.4, 0.25)]
RECORD = {"kind": "eagle", "vocab_size": 256, "draft_vocab_size": 64,
          "training": {"settings": {"kind": "eagle", "seed": 3, "lr": 0.002, "eval_k": 4,
                                    "reg_weight": 1.0, "cls_weight": 0.1, "n_medusa": 4,
                                    "feature_noise": 0.1},
                       "curve": CURVE, "train_sequences": 12, "train_tokens": 3456,
                       "held_out_sequences": 2, "steps": 20,
                       "draft_vocab_coverage_train": 1.0,
                       "draft_vocab_coverage_held_out": 0.875, "train_s": 42.0,
                       "features_s": 3.5, "features_cached": False, "torch_threads": 2}}


def _xy(item):
    x, y = item.getData()
    return ([] if x is None else [float(v) for v in x]), \
        ([] if y is None else [float(v) for v in y])


def _table(table) -> dict[str, str]:
    return {table.item(r, 0).text(): table.item(r, 1).text() for r in range(table.rowCount())}


@pytest.fixture
def panel(qtbot):
    p = TrainingPanel()
    qtbot.addWidget(p)
    return p


def test_a_record_drawn(panel):
    panel.draw_head(RECORD, "/x/eagle.safetensors", 2_500_000, "shown: a made-up head")
    # the loss has no point before training (epoch 0)
    assert _xy(panel.loss_plot.head) == ([1.0, 2.0], [0.9, 0.5])
    assert _xy(panel.tokens_plot.head) == ([0.0, 1.0, 2.0], [1.0, 1.2, 1.4])
    x, y = _xy(panel.agreement_plot.head)
    assert x == [0, 1, 2] and y == pytest.approx([0.0, 15.0, 25.0])  # in %
    assert _xy(panel.tokens_plot.earlier) == ([], [])
    assert not panel.tokens_plot.legend.isVisible()
    assert "(K = 4)" in panel.tokens_plot.plot.getAxis("left").labelText
    assert panel.loss_plot.plot.getAxis("left").labelText.startswith("SmoothL1 + 0.1·CE")
    facts = _table(panel.facts)
    assert facts["Head file"] == "eagle.safetensors"
    assert facts["File size"] == "2.5 MB"
    assert facts["Training sequences"] == "12"
    assert facts["Training tokens"] == "3,456"
    assert facts["Held-out sequences"] == "2"
    assert facts["Draft vocabulary"] == "64 of 256 tokens"
    assert facts["Its coverage: training / held-out tokens"] == "100.0 % / 87.5 %"
    assert facts["Epochs · optimizer steps"] == "2 · 20"
    assert facts["Training time"] == "42.0 s on 2 threads"
    assert facts["Held-out after training"] == ("1.40 tokens per forward, 25.0 % first-token "
                                                "agreement")
    settings = _table(panel.settings_table)
    assert settings["seed"] == "3" and settings["learning rate"] == "0.002"
    assert "Medusa heads" not in settings  # an EAGLE head's record
    assert panel.status.text() == "shown: a made-up head"


def test_a_medusa_record_names_its_loss_and_heads(panel):
    training = dict(RECORD["training"], settings={"kind": "medusa", "n_medusa": 2, "eval_k": 5})
    panel.draw_head(dict(RECORD, kind="medusa", training=training))
    assert "0.8ᵏ" in panel.loss_plot.plot.getAxis("left").labelText
    assert "(K = 2)" in panel.tokens_plot.plot.getAxis("left").labelText  # as long as the heads
    assert _table(panel.settings_table)["Medusa heads"] == "2"


def test_no_head(panel):
    panel.draw_head(None, note="tiny has no head")
    for p in panel.plots:
        assert _xy(p.head) == ([], [])
    assert _table(panel.facts)["Training tokens"] == "—"
    assert panel.settings_table.rowCount() == 0
    assert panel.status.text() == "tiny has no head"


def test_the_shipped_head_drawn(panel):
    path = shipped_head_path("eagle")
    record = read_record(path)
    panel.draw_head(record, path, path.stat().st_size)
    curve = record["training"]["curve"]
    assert _xy(panel.tokens_plot.head) == ([p["epoch"] for p in curve],
                                           [p["tokens_per_forward"] for p in curve])
    assert _table(panel.facts)["Training tokens"] == f"{record['training']['train_tokens']:,}"


def test_a_run_grows_over_the_head_before(panel):
    panel.draw_head(RECORD, "/x/eagle.safetensors", 1000)
    panel.begin_run({"kind": "medusa", "epochs": 3, "seed": 5, "n_medusa": 2, "eval_k": 5})
    assert _table(panel.settings_table)["seed"] == "5"  # the run's settings
    assert _table(panel.facts)["Training tokens"] == "—"  # its data comes when it is saved
    assert "(K = 2)" in panel.tokens_plot.plot.getAxis("left").labelText
    assert panel.cancel_button.isEnabled() and not panel.train_button.isEnabled()
    assert not panel.kind.isEnabled()
    assert _xy(panel.tokens_plot.earlier) == ([0.0, 1.0, 2.0], [1.0, 1.2, 1.4])
    assert _xy(panel.tokens_plot.head) == ([], [])
    assert panel.tokens_plot.legend.isVisible()
    assert "Medusa heads" in panel.status.text() and "3 epochs" in panel.status.text()
    panel.set_progress("generate", 128, 805, None)
    assert "128 / 805" in panel.progress.text()
    assert panel.progress_bar.maximum() == 805 and panel.progress_bar.value() == 128
    panel.add_point(_point(0, None, 1.0, 0.0))
    panel.add_point(_point(1, 2.5, 1.1, 0.05))
    panel.set_progress("train", 7, 30, 2.25)
    assert panel.progress.text() == "training: step 7 / 30, loss 2.2500"
    assert _xy(panel.loss_plot.head) == ([1.0], [2.5])
    assert _xy(panel.tokens_plot.head) == ([0.0, 1.0], [1.0, 1.1])
    assert _xy(panel.tokens_plot.earlier)[1] == [1.0, 1.2, 1.4]  # still there
    panel.end_run("cancelled")
    assert panel.train_button.isEnabled() and not panel.cancel_button.isEnabled()
    assert panel.progress.text() == "" and panel.status.text() == "cancelled"


def test_buttons_ask_for_work(panel, qtbot):
    panel.set_kind("medusa")
    panel.epochs.setValue(2)
    with qtbot.waitSignal(panel.train_requested) as got:
        panel.train_button.click()
    assert got.args == ["medusa", 2]
    panel.set_busy(True)
    with qtbot.waitSignal(panel.cancel_requested):
        panel.cancel_button.click()
    panel.set_busy(False)
    with qtbot.waitSignal(panel.kind_changed) as got:
        panel.kind.setCurrentIndex(panel.kind.findData("eagle"))
    assert got.args == ["eagle"]
    panel.set_busy(False, read_only=True)
    assert not panel.train_button.isEnabled()


def test_no_head_after_a_head_keeps_nothing_of_it(panel):
    panel.draw_head(RECORD)
    panel.draw_head(None)
    assert panel.loss_plot.plot.getAxis("left").labelText == "loss per batch"
    assert panel.tokens_plot.plot.getAxis("left").labelText == "tokens per target forward"
    low, high = panel.agreement_plot.plot.viewRange()[1]
    assert low <= 0 and high >= 100  # the empty range, not the last head's 0-25 %
