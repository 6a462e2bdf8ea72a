"""engines/board/codegen.py: what the generated C holds (no compiler needed here; the
firmware tests compile and run it)."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from inferlab.engines.board.codegen import CodegenError, board_config_h, generate, write_if_changed
from inferlab.engines.board.toolchain import FirmwareBuildError, build_firmware, tflm_head_tail
from inferlab.engines.mcu.graph import load_model
from inferlab.engines.mcu.model_planners import plan_model
from tests.engines.mcu.test_interpreter import model_path


def c_array(text: str, name: str) -> list[int]:
    match = re.search(rf"\b{name}\[\d+\] FW_MODEL_DATA[^=]*= \{{(.*?)\}};", text, re.S)
    assert match, name
    return [int(v) for v in match.group(1).replace("\n", " ").split(",")]


def test_hello_world_sources():
    path = model_path("hello_world_int8")
    data = path.read_bytes()
    model = load_model(data)
    gen = generate(path)
    plan = plan_model(model)
    assert gen.name == "hello_world_int8" and gen.symbol == "fw_model"
    assert gen.sha256 == hashlib.sha256(data).hexdigest() and gen.model_bytes == len(data)
    assert gen.arena_bytes == plan.arena_bytes == 32
    assert "#define ARENA_SIZE 32u" in gen.model_c
    assert "static uint8_t arena[ARENA_SIZE] FW_ARENA_DATA;" in gen.model_c
    assert c_array(gen.model_c, "default_offsets") == list(plan.offsets)
    assert bytes(c_array(gen.model_c, "model_sha256")) == hashlib.sha256(data).digest()
    assert gen.model_c.count("FW_OP_FULLY_CONNECTED") == 3
    assert "const fw_model_t fw_model FW_MODEL_DATA" in gen.model_c
    assert "#define FW_MODEL fw_model" in gen.model_h
    # every constant an op reads, bit for bit, and their bytes counted as weights
    weights = 0
    for op in model.operators:
        for t in op.inputs[1:]:
            arr = model.constant_array(t)
            assert c_array(gen.model_c, f"c{t}") == arr.ravel().tolist()
            weights += arr.nbytes
    assert gen.weights_bytes == weights == 420


def test_person_detect_tables_and_weights():
    gen = generate(model_path("person_detect"))
    assert gen.op_count == 31 and gen.arena_bytes == 55296
    assert gen.input_bytes == 96 * 96 and gen.output_bytes == 2
    # every weight once; RESHAPE's shape tensor is not needed on the board
    model = load_model(model_path("person_detect"))
    reshape = next(op for op in model.operators if op.op == "RESHAPE")
    assert f"c{reshape.inputs[1]}[" not in gen.model_c
    assert 218_000 < gen.weights_bytes < sum(len(b) for b in model.buffers)


def test_a_given_plan_is_compiled_in():
    model = load_model(model_path("micro_speech_quantized"))
    linear = plan_model(model, "linear")
    gen = generate(model_path("micro_speech_quantized"), plan=linear)
    assert gen.arena_bytes == linear.arena_bytes
    assert c_array(gen.model_c, "default_offsets") == list(linear.offsets)
    other = plan_model(load_model(model_path("hello_world_int8")))
    with pytest.raises(CodegenError, match="another model"):
        generate(model_path("micro_speech_quantized"), plan=other)


def test_unsupported_models_and_names_are_refused():
    with pytest.raises(CodegenError, match="operator"):
        generate(model_path("audio_preprocessor_int8"))
    with pytest.raises(CodegenError, match="float32"):
        generate(model_path("hello_world_float"))
    with pytest.raises(CodegenError, match="identifier"):
        generate(model_path("hello_world_int8"), symbol="1bad-name")


def test_floats_are_written_exactly():
    from inferlab.engines.board.codegen import _c_float

    for v in (0.0390625, 1 / 3, 1e-7, 123.456):
        text = _c_float(v)
        assert text.endswith("f")
        assert float.fromhex(text[:-1]) == float(np.float32(v))


def test_board_config_h_quotes_names():
    text = board_config_h("nrf52840", 'A "quoted" \\ name', 262144, 1048576)
    assert '#define FW_BOARD_NAME "A \\042quoted\\042 \\134 name"' in text
    assert "#define FW_SRAM_BYTES 262144" in text and "#define FW_FLASH_BYTES 1048576" in text


def test_write_if_changed_keeps_unchanged_files(tmp_path):
    path = tmp_path / "x.c"
    assert write_if_changed(path, "a")
    mtime = path.stat().st_mtime_ns
    assert not write_if_changed(path, "a") and path.stat().st_mtime_ns == mtime
    assert write_if_changed(path, "b") and path.read_text() == "b"


def test_tflm_figures_come_from_sources_md(tmp_path):
    assert tflm_head_tail(model_path("person_detect")) == (55296, 29968)
    assert tflm_head_tail(model_path("hello_world_int8")) == (32, 1472)
    assert tflm_head_tail(tmp_path / "nothing.tflite") is None


def test_build_refuses_before_compiling():
    with pytest.raises(FirmwareBuildError, match="unknown target"):
        build_firmware(model_path("hello_world_int8"), "esp32")
    with pytest.raises(FirmwareBuildError, match="nrf52840 board"):
        build_firmware(model_path("hello_world_int8"), "nrf52840", "stm32f411")
    with pytest.raises(FirmwareBuildError, match=r"55,296 B.*32,768 B"):
        build_firmware(model_path("person_detect"), "host", "samd21")
