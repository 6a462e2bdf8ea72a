"""The firmware's C kernels against the MCU lab's Python interpreter, bit for bit.

Every kernel (conv, depthwise, fully connected, average and max pooling, softmax to int8
and int16, ADD with broadcasting, QUANTIZE / requantize / DEQUANTIZE) on seeded random
one-operator models and inputs: the generated C model, run by the firmware core (built
for the host as a shared library, driven through ctypes), must write exactly the bytes the
arena interpreter writes. The three shared models must equal TFLM itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.engines.board import protocol as p
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.inputs import random_input
from inferlab.engines.mcu.interpreter import ArenaInterpreter
from inferlab.engines.mcu.model_planners import plan_model
from tests.firmware.fwtools import SHARED_MODELS, model_path, tflm_outputs
from tests.firmware.kernel_cases import all_cases

CASE_NAMES = [name for name, _, _ in all_cases()]


def specs(model, tensors):
    return [(model.tensors[t].shape, model.tensors[t].dtype) for t in tensors]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_kernel_equals_python_interpreter(fwlib, kernel_cases, name):
    _, data, feeds = next(c for c in kernel_cases if c[0] == name)
    model = load_model(data)
    interp = ArenaInterpreter(model, plan_model(model))
    out_specs = specs(model, model.outputs)
    out_bytes = sum(model.tensors[t].nbytes for t in model.outputs)
    distinct = set()
    for feed in feeds:
        want = interp.invoke(feed if len(feed) > 1 else feed[0])
        got = fwlib.run(name, p.pack_tensors(feed, specs(model, model.inputs)), out_bytes)
        (got_array,) = p.unpack_tensors(got, out_specs)
        assert got_array.dtype == want.dtype
        assert got == np.ascontiguousarray(want).tobytes(), (name, got_array.ravel()[:12],
                                                              want.ravel()[:12])
        distinct.add(got)
    assert len(distinct) > 1 or name.startswith("softmax")  # the inputs exercise the op


def test_every_interpreter_kernel_has_a_case(kernel_cases):
    from inferlab.engines.mcu.interpreter import supported_ops

    seen = {load_model(data).operators[0].op for _, data, _ in kernel_cases}
    # RESHAPE is a copy; the shared models run it (micro_speech, person_detect).
    assert set(supported_ops()) - seen == {"RESHAPE"}


@pytest.mark.parametrize("stem", SHARED_MODELS)
def test_shared_models_on_the_core_equal_tflm(fwlib, stem):
    path = model_path(stem)
    model = load_model(path)
    feeds = [random_input(model, seed) for seed in range(3)]
    want = tflm_outputs(path, feeds)
    out_bytes = sum(model.tensors[t].nbytes for t in model.outputs)
    for feed, w in zip(feeds, want, strict=True):
        got = fwlib.run(stem, p.pack_tensors(feed, specs(model, model.inputs)), out_bytes)
        assert got == np.ascontiguousarray(w).tobytes(), (stem, got, w)
