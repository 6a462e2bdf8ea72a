"""The attention lab's settings: one table for the window, remembered settings and snapshots."""

from __future__ import annotations

from inferlab.engines.attention.step import EXECUTIONS, TILED
from inferlab.engines.attention.traffic import tiles_for_on_chip
from inferlab.engines.labs.attention.source import SEEDED, SOURCES
from inferlab.engines.settings import Setting

ATTENTION_DEFAULTS = {"n": 1024, "d": 64, "heads": 1, "causal": False, "br": 64, "bc": 64,
                      "on_chip_kib": 0, "execution": TILED, "seed": 0, "source": SEEDED,
                      "layer": 0}
ATTENTION_SETTINGS = {
    "n": Setting("int", 1, 16384),
    "d": Setting("int", 1, 512),
    "heads": Setting("int", 1, 64),
    "causal": Setting("bool"),
    "br": Setting("int", 1, 4096),
    "bc": Setting("int", 1, 4096),
    "on_chip_kib": Setting("int", 0, 65536),
    "execution": Setting("str", choices=EXECUTIONS),
    "seed": Setting("int", 0, 2**31 - 1),
    "source": Setting("str", choices=SOURCES),
    "layer": Setting("int", 0, 255),
}
"""on_chip_kib: the on-chip memory M (a GPU's shared memory per SM, a CPU core's L2) in KiB;
0 takes Br and Bc as given, otherwise they are chosen from M as FlashAttention does.
source: seeded Q, K, V (N × d as set), or layer `layer` of a model on the shipped texts (its
own d; N and heads at most the text's tokens and the model's heads)."""

ELEMENT_BYTES = 4  # fp32: what the engines compute in and the SDPA check holds to 1e-5
MAX_NAIVE_BYTES = 2 * 2**30
"""The naive engine keeps S and P (2·H·N² floats); past this the lab refuses to step it."""

ON_CHIP_PRESETS_KIB = {"A100 / H100 shared memory per SM": 192, "this CPU's L2 (per core)": 1024}


def tile_sizes(settings: dict, d: int | None = None) -> tuple[int, int]:
    """(Br, Bc) the run uses: from the on-chip memory when one is given (for head width `d`,
    the setting's by default), else as set."""
    kib = int(settings["on_chip_kib"])
    if kib:
        return tiles_for_on_chip(kib * 1024, int(d or settings["d"]), ELEMENT_BYTES)
    return int(settings["br"]), int(settings["bc"])
