"""Memory lab: KV cache and weights against a device's memory, and what fits.

The model is a preset, an imported config.json, or a model the app loads by name (Gemma 3
270M, tiny-moe) by its own description (`model.config`): loaded in a worker the first time it
is chosen, the plan drawn when it arrives."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox

from inferlab.app.labs.base import Lab
from inferlab.engines.fields import clean_settings
from inferlab.engines.labs.memory.records import MemorySnapshot
from inferlab.engines.labs.memory.section import memory_section
from inferlab.engines.labs.memory.session import (
    LOCAL,
    imported_model,
    memory_plans,
    memory_targets,
)
from inferlab.engines.labs.memory.settings import MEMORY_DEFAULTS, MEMORY_SETTINGS
from inferlab.engines.model.cache import described, description_choices, model_description
from inferlab.engines.model.config import ConfigError, list_model_presets
from inferlab.engines.model.registry import MODEL_NAMES
from inferlab.views.memory_view import MemoryView


class MemoryLab(Lab):
    lab_id = "memory"

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = MemoryView()
        self.widget = self.view
        self.imported: dict[str, object] = {}
        self._describing: set[str] = set()  # registry models whose description is loading
        self._settings = clean_settings(self.saved_settings(), MEMORY_SETTINGS, MEMORY_DEFAULTS)
        self._refresh_choices()
        self.view.set_settings(self._settings)
        self._settings = self.view.settings()
        self.view.settings_changed.connect(self._on_settings)
        self.view.import_requested.connect(self.import_dialog)
        context.roofs_changed.connect(lambda _d: self._refresh_choices())
        context.device_changed.connect(lambda _d: self._refresh_choices())
        self.recompute()

    def _refresh_choices(self) -> None:
        if self.read_only:
            return
        self.targets = memory_targets(self.context.device(), self.context.roofs())
        models = description_choices()
        models += [(key, f"{cfg.name} (imported)") for key, cfg in self.imported.items()]
        self.view.set_choices(models, [(k, t["label"]) for k, t in self.targets.items()])
        if hasattr(self, "_settings"):
            self.view.set_settings(self._settings)
            self.recompute()

    def model_config(self, model_id: str):
        """The description of `model_id`, or None while a registry model loads (in a worker:
        `recompute` runs again when it arrives)."""
        if model_id in self.imported:
            return self.imported[model_id]
        cfg = described(model_id, load=False)
        if cfg is None and model_id in MODEL_NAMES and model_id not in self._describing:
            self._describing.add(model_id)

            def arrived(_cfg) -> None:
                self._describing.discard(model_id)
                self.recompute()

            def failed(message: str) -> None:
                self._describing.discard(model_id)
                self.view.model_note.setText(f"{model_id}: {message}")

            self.context.run_task(f"Memory lab: load {model_id}",
                                  lambda _progress, _stop: model_description(model_id),
                                  arrived, failed)
        return cfg

    def _on_settings(self, settings: dict) -> None:
        self._settings = settings
        self.recompute()

    def recompute(self) -> None:
        if self.read_only:
            return
        cfg = self.model_config(self._settings["model"])
        if cfg is None:
            self.view.model_note.setText(f"Loading {self._settings['model']} to read its "
                                         "description…")
            return
        target = self.targets.get(self._settings["target"]) or self.targets[LOCAL]
        try:
            plan, variants = memory_plans(self._settings, cfg, target)
        except ValueError as e:  # a tensor degree that does not split the heads
            self.view.model_note.setText(f"{e}: choose another tensor degree.")
            return
        self.view.draw(cfg, plan, variants, target["label"])
        self._last = (cfg, plan, target)

    def import_config(self, path: str | Path) -> str:
        """Add a Hugging Face config.json as a model choice and select it; returns its id."""
        key, cfg = imported_model(path)
        self.imported[key] = cfg
        self._settings = dict(self._settings, model=key)
        self._refresh_choices()
        return key

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.widget, "Import Hugging Face config.json", "",
                                              "config.json (*.json);;All files (*)")
        if not path:
            return
        try:
            self.import_config(path)
        except (ConfigError, ValueError, OSError) as exc:
            QMessageBox.warning(self.widget, "Cannot import config", str(exc))

    # settings and snapshots ---------------------------------------------------------------------
    def settings(self) -> dict:
        settings = dict(self._settings)
        if settings["model"] not in list_model_presets() and settings["model"] not in MODEL_NAMES:
            settings["model"] = MEMORY_DEFAULTS["model"]  # imported files are not remembered
        return settings

    def snapshot_section(self) -> dict:
        cfg, plan, target = self._last
        return memory_section(self._settings, cfg, plan, target)

    def show_snapshot(self, record: MemorySnapshot) -> None:
        settings, cfg, target = record.settings, record.model_config, record.target
        plan, variants = memory_plans(settings, cfg, target)
        self.read_only = True
        self.view.set_choices([(settings["model"], cfg.name)], [(settings["target"], target["label"])])
        self.view.set_settings(settings)
        self.view.set_read_only(True)
        self.view.draw(cfg, plan, variants, target["label"])

    def show_live(self) -> None:
        super().show_live()
        self.view.set_read_only(False)
        self._refresh_choices()
