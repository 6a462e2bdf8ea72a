"""The MCU lab's snapshot section (`labs.mcu`): the settings, the McuState (plans, per-op
table, runs) and the metrics a comparison lists; and its strict reader."""

from __future__ import annotations

from inferlab.engines.fields import read_object
from inferlab.engines.labs.mcu.records import McuSnapshot, McuState
from inferlab.engines.labs.mcu.settings import check_mcu_settings
from inferlab.engines.trace.snapshot import lab_section, section_field


def mcu_section(settings: dict, state: McuState | None) -> dict:
    """The MCU lab's section (state None: the lab had loaded no model)."""
    if state is None:
        return lab_section(settings, {}, {})
    metrics = {"model": state.model, "board": state.board.id,
               "arena_bytes": {lay.planner: lay.arena_bytes for lay in state.layouts},
               "lower_bound_bytes": state.layouts[0].lower_bound_bytes,
               "sram_margin_bytes": state.fit.sram_margin_bytes,
               "flash_margin_bytes": state.fit.flash_margin_bytes, "fits": state.fit.fits,
               "macs": sum(o.macs for o in state.ops),
               "est_cycles": sum(o.est_cycles for o in state.ops)}
    if state.host_run is not None:
        metrics["host_total_us"] = state.host_run.total_us
    if state.board_run is not None:
        metrics["board_total_us"] = state.board_run.total_us
    return lab_section(settings, state.to_dict(), metrics)


def read_mcu_section(sec: dict) -> McuSnapshot:
    """A snapshot's `labs.mcu` as an McuSnapshot; ValueError names a bad field."""
    read_object(sec, "labs.mcu")
    settings = check_mcu_settings(section_field(sec, "settings", "labs.mcu"),
                                  "labs.mcu.settings")
    raw = read_object(section_field(sec, "state", "labs.mcu"), "labs.mcu.state")
    return McuSnapshot(settings, McuState.from_dict(raw) if raw else None)
