"""The roofline lab's record: `RooflineSnapshot`, a snapshot's `labs.roofline` read once.
The roofs and operation points are engines/hardware's records, the model engines/model's."""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.hardware.microbench import MeasuredPoint, MeasuredRoofs
from inferlab.engines.model.config import ModelConfig


@dataclass(frozen=True)
class RooflineSnapshot:
    """The settings as checked, the measured roofs (None: not measured; else with an fp32
    peak, what the plot falls back to), the measured operations and the model placed (None:
    none)."""

    settings: dict
    roofs: MeasuredRoofs | None
    points: tuple[MeasuredPoint, ...]
    model_config: ModelConfig | None

    def roof_dtype(self) -> str:
        """The dtype of the roof drawn: the settings', fp32 where it has no measured peak."""
        dtype = self.settings["dtype"]
        return dtype if self.roofs is not None and dtype in self.roofs.peak_flops else "fp32"
