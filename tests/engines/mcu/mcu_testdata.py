"""Test data for the MCU engine tests: the shipped example models and random float graphs."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np

from inferlab.engines.mcu.examples import example_models, examples_dir
from tests.engines.mcu.tflite_builder import write_tflite

MODELS_DIR = examples_dir()


def model_paths() -> list[Path]:
    return example_models()


def tflm_heads_from_sources() -> dict[str, int]:
    """model stem -> TFLM's measured head bytes, read from the table in SOURCES.md."""
    text = (MODELS_DIR / "SOURCES.md").read_text()
    section = text.split("Measured TFLM arena usage", 1)[-1]
    rows = re.findall(r"^\|\s*([A-Za-z0-9_]+)\s*\|\s*([\d,]+)\s*\|", section, re.M)
    return {stem: int(head.replace(",", "")) for stem, head in rows}




def random_graph(seed: int, n_ops: int | None = None) -> bytes:
    """A random branchy float graph TFLM can run: CONCATENATION, ADD and SLICE on 1-D
    tensors of assorted sizes, one input, the last tensor (and sometimes an earlier one,
    whose lifetime then runs to the end) as outputs."""
    rng = random.Random(seed)
    n_ops = n_ops if n_ops is not None else rng.randint(2, 14)
    tensors: list[dict] = [dict(shape=[rng.randint(1, 24)], dtype="float32")]
    ops: list[dict] = []

    def new(shape, **kw) -> int:
        tensors.append(dict(shape=shape, **kw))
        return len(tensors) - 1

    for _ in range(n_ops):
        recent = [t for t in range(len(tensors)) if "data" not in tensors[t]][-4:]
        kind = rng.choice(("concat", "add", "slice"))
        if kind == "concat":
            ins = rng.sample(recent, rng.randint(1, min(3, len(recent))))
            length = sum(tensors[t]["shape"][0] for t in ins)
            ops.append(dict(op="CONCATENATION", inputs=ins, options={"Axis": 0}))
        elif kind == "add":
            x = rng.choice(recent)
            length = tensors[x]["shape"][0]
            ops.append(dict(op="ADD", inputs=[x, x]))
        else:
            x = rng.choice(recent)
            n = tensors[x]["shape"][0]
            length = rng.randint(1, n)
            begin = new([1], dtype="int32", data=np.int32([rng.randint(0, n - length)]).tobytes())
            size = new([1], dtype="int32", data=np.int32([length]).tobytes())
            ops.append(dict(op="SLICE", inputs=[x, begin, size]))
        ops[-1]["outputs"] = [new([length], dtype="float32")]
    outputs = [len(tensors) - 1]
    earlier = [t for t in range(1, len(tensors) - 1) if "data" not in tensors[t]]
    if earlier and rng.random() < 0.5:
        outputs.append(rng.choice(earlier))
    return write_tflite(tensors, ops, [0], outputs)
