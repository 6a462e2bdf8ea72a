"""The MCU lab's settings: the table every snapshot and the window check, its defaults, and
the planners and boards there are to choose from.

`model` is the model file's path; "" means the default shipped example
(engines/mcu/examples.py)."""

from __future__ import annotations

from inferlab.engines.board.boards import list_boards
from inferlab.engines.fields import Setting, check_settings
from inferlab.engines.mcu.model_planners import planner_names

MCU_DEFAULTS = {"model": "", "planner": "tflm-greedy", "compare": "patch-based",
                "board": "nrf52840", "seed": 0, "y_to_sram": False}
MCU_NO_COMPARE = "none"
MCU_HOST_REPEATS = 5  # host runs: one warm-up, then the best of this many invocations


def mcu_planner_names() -> list[str]:
    """Every planner the engines offer: TFLM-style buffer planners, then model-level ones."""
    return list(planner_names())


def mcu_board_ids() -> list[str]:
    return [b.id for b in list_boards()]


MCU_SETTINGS = {
    "model": Setting("str"),
    "planner": Setting("str", choices=mcu_planner_names),
    "compare": Setting("str", choices=lambda: [*mcu_planner_names(), MCU_NO_COMPARE]),
    "board": Setting("str", choices=mcu_board_ids),
    "seed": Setting("int", 0, 2**32 - 1),
    "y_to_sram": Setting("bool"),
}


def check_mcu_settings(settings, where: str = "settings") -> dict:
    """`settings` over the defaults, every field checked (ValueError names the field)."""
    return check_settings(settings, MCU_SETTINGS, MCU_DEFAULTS, where)


def mcu_planners(settings: dict) -> list[str]:
    """The planners the settings ask for: the chosen one, then the compared one if any."""
    chosen, compare = settings["planner"], settings.get("compare", MCU_NO_COMPARE)
    return [chosen] + ([compare] if compare not in (MCU_NO_COMPARE, chosen, None) else [])
