"""On the shipped SmolLM2 GGUF: re-quantizing its dequantized weights gives the file's bytes.

The file's Q4_1 weights are the lab's baseline; if our Q4_1 reproduces them exactly, it is
llama.cpp's quantizer. Fourteen tensors (and a slice of the large Q8_0 embedding) keep it quick.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGUFReader
from gguf.quants import dequantize

from inferlab.engines.quant import quantize_gguf

pytestmark = pytest.mark.slow

# Every matrix of the first and the last block.
Q4_1_TENSORS = tuple(f"blk.{layer}.{name}.weight" for layer in (0, 29) for name in (
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"))


@pytest.fixture(scope="module")
def tensors(smollm2_path):
    return {t.name: t for t in GGUFReader(smollm2_path).tensors}


def requantized(record, kind: str, rows: slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
    stored = np.asarray(record.data[rows])
    weights = dequantize(stored, record.tensor_type)
    return quantize_gguf(torch.from_numpy(np.ascontiguousarray(weights)), kind).numpy(), stored


@pytest.mark.parametrize("name", Q4_1_TENSORS)
def test_q4_1_reproduces_the_files_bytes(tensors, name):
    record = tensors[name]
    assert record.tensor_type.name == "Q4_1"
    ours, stored = requantized(record, "q4_1")
    assert np.array_equal(ours, stored)


def test_q8_0_embedding_rows_reproduce_the_files_bytes(tensors):
    record = tensors["token_embd.weight"]
    assert record.tensor_type.name == "Q8_0"
    ours, stored = requantized(record, "q8_0", slice(0, 2048))
    assert np.array_equal(ours, stored)
