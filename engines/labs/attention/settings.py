"""The attention lab's settings: one table for the window, remembered settings and snapshots."""

from __future__ import annotations

from pathlib import Path

from inferlab.engines.attention.step import EXECUTIONS, TILED
from inferlab.engines.attention.traffic import tiles_for_on_chip
from inferlab.engines.fields import Setting
from inferlab.engines.labs.attention.source import SEEDED, SOURCES

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
MAX_STEPS = 1_000_000
"""The most tiles a lab run steps (each keeps a record; a snapshot holds them all)."""
MAX_NAIVE_BYTES = 2 * 2**30
"""The naive engine keeps S and P (2·H·N² floats); past this the lab refuses to step it."""

GPU_ON_CHIP_KIB = {"H100: shared memory per thread block": 227,
                   "A100: shared memory per thread block": 163}
"""The most shared memory one thread block may hold (NVIDIA's H100 and A100 tuning guides:
228 and 164 KB per SM, 1 KB of each kept by the system)."""


def cpu_l2_kib(cache_dir: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """This CPU's level-2 cache per core in KiB (Linux sysfs), None where unknown."""
    for index in sorted(Path(cache_dir).glob("index*")):
        try:
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip()  # "1024K", "2M" or bytes
                unit = {"K": 1, "M": 1024}.get(size[-1:])
                return int(size[:-1]) * unit if unit else int(size) // 1024
        except (OSError, ValueError):
            return None
    return None


def on_chip_presets() -> dict[str, int]:
    """Label -> on-chip memory M in KiB: the GPUs' shared memory and this CPU's L2."""
    l2 = cpu_l2_kib()
    return GPU_ON_CHIP_KIB | ({f"this CPU: L2 per core ({l2:,} KiB)": l2} if l2 else {})


def tile_sizes(settings: dict, d: int | None = None) -> tuple[int, int]:
    """(Br, Bc) the run uses: from the on-chip memory when one is given (for head width `d`,
    the setting's by default), else as set."""
    kib = int(settings["on_chip_kib"])
    if kib:
        return tiles_for_on_chip(kib * 1024, int(d or settings["d"]), ELEMENT_BYTES)
    return int(settings["br"]), int(settings["bc"])
