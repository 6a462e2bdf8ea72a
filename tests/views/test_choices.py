"""The kernel-path combo and a lab view carrying its choice in the settings."""

from __future__ import annotations

from inferlab.engines.fields import clean_settings
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.labs.kv.settings import KV_DEFAULTS, KV_SETTINGS
from inferlab.views.choices import kernel_choice
from inferlab.views.kv_view import KVView


def test_the_kernel_combo_offers_every_setting_value(qtbot):
    combo = kernel_choice()
    qtbot.addWidget(combo)
    assert [combo.itemData(i) for i in range(combo.count())] == list(KERNEL_SETTING_CHOICES)
    assert combo.currentData() == "auto"


def test_the_kv_view_round_trips_the_kernels_setting(qtbot):
    view = KVView()
    qtbot.addWidget(view)
    emitted = []
    view.settings_changed.connect(emitted.append)
    view.set_settings(dict(KV_DEFAULTS, kernels="torch"))
    assert view.settings()["kernels"] == "torch" and not emitted  # set quietly
    view.kernels.setCurrentIndex(view.kernels.findData("native"))
    assert emitted[-1]["kernels"] == "native"
    # what the view emits is what the lab's table accepts
    assert clean_settings(emitted[-1], KV_SETTINGS, KV_DEFAULTS)["kernels"] == "native"
    view.set_read_only(True)
    assert not view.kernels.isEnabled()
