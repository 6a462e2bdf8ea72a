"""The memory lab's side of a snapshot comparison's plots (engines.trace.overlay).

From `read_memory_section`'s records: one GPU's memory (weights + batch × context × KV bytes
per token, the lab's own plan) against the context, from 256 tokens to four times the
settings' context (the settings' own among them), and the budget (device memory × utilisation) dashed: where a line crosses
its budget is the longest context that fits.
"""

from __future__ import annotations

import numpy as np

from inferlab.engines.labs.memory.records import MemorySnapshot
from inferlab.engines.labs.memory.session import memory_plans
from inferlab.engines.labs.memory.settings import MEMORY_SETTINGS
from inferlab.engines.trace.overlay import Curve, Plot

GIB = 2**30


def memory_plots(snapshot: MemorySnapshot) -> list[Plot]:
    """`snapshot`: what read_memory_section returns."""
    settings, cfg, target = snapshot.settings, snapshot.model_config, snapshot.target
    high = min(4 * int(settings["context"]), int(MEMORY_SETTINGS["context"].high))
    contexts = np.unique(np.append(np.geomspace(min(256, high), high, 33).astype(np.int64),
                                   int(settings["context"])))  # the lab's own plan among them
    plans = [memory_plans(dict(settings, context=int(c)), cfg, target)[0] for c in contexts]
    return [Plot("Memory per GPU against context", "context (tokens per request)",
                 "memory (GiB = 2³⁰ bytes)",
                 (Curve(f"weights + KV × batch {settings['batch']}", contexts,
                        [p.total_bytes / GIB for p in plans]),
                  Curve("budget", contexts, [p.budget_bytes / GIB for p in plans], dashed=True)),
                 log_x=True)]
