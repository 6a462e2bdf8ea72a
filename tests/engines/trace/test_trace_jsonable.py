"""to_jsonable: records, numpy, tensors and non-finite floats become plain JSON."""

import dataclasses
import enum
import json
import math
from pathlib import PurePosixPath

import numpy as np
import pytest

from inferlab.engines.trace.jsonable import to_jsonable


class Mode(enum.Enum):
    PAGED = "paged"
    CONTIGUOUS = "contiguous"


class Level(enum.IntEnum):
    LOW = 1


@dataclasses.dataclass(frozen=True)
class Block:
    block_id: int
    ref_count: np.int32


@dataclasses.dataclass(frozen=True)
class Table:
    blocks: tuple[Block, ...]
    usage: np.ndarray
    mode: Mode
    peak_s: float


@dataclasses.dataclass(frozen=True)
class WithToDict:
    secret: object

    def to_dict(self) -> dict:
        return {"shown": np.float32(0.5)}


def test_nested_dataclass_numpy_and_nan():
    table = Table(
        blocks=(Block(0, np.int32(2)), Block(7, np.int32(1))),
        usage=np.array([[0.5, np.nan], [np.inf, -np.inf]], dtype=np.float32),
        mode=Mode.PAGED,
        peak_s=float("nan"),
    )
    assert to_jsonable({"table": table, "n": np.int64(3)}) == {
        "table": {
            "blocks": [{"block_id": 0, "ref_count": 2}, {"block_id": 7, "ref_count": 1}],
            "usage": [[0.5, None], [None, None]],
            "mode": "paged",
            "peak_s": None,
        },
        "n": 3,
    }


def test_output_is_strict_json():
    value = to_jsonable({"x": [np.float64("nan"), float("inf"), 1.5], "y": {1, 2}})
    text = json.dumps(value, allow_nan=False)
    assert json.loads(text) == {"x": [None, None, 1.5], "y": [1, 2]}


def test_exact_plain_types():
    out = to_jsonable([np.bool_(True), np.int8(-3), np.float16(0.25), Level.LOW, True])
    assert out == [True, -3, 0.25, 1, True]
    assert [type(v) for v in out] == [bool, int, float, int, bool]


def test_to_dict_is_preferred_over_fields():
    assert to_jsonable(WithToDict(secret=object())) == {"shown": 0.5}


def test_tuples_sets_paths_and_keys():
    assert to_jsonable(
        {
            "t": (1, (2, 3)),
            "s": frozenset({"b", "a"}),
            "mixed": {1, "a"},
            "p": PurePosixPath("/models/tiny.gguf"),
            3: "int key",
            Mode.CONTIGUOUS: "enum key",
            np.int64(4): "numpy key",
        }
    ) == {
        "t": [1, [2, 3]],
        "s": ["a", "b"],
        "mixed": ["a", 1],  # mixed types: ordered by their JSON text
        "p": "/models/tiny.gguf",
        "3": "int key",
        "contiguous": "enum key",
        "4": "numpy key",
    }


def test_colliding_keys_are_refused():
    with pytest.raises(ValueError, match="collide"):
        to_jsonable({1: "a", "1": "b"})


def test_torch_tensor_dtype_and_device():
    import torch
    out = to_jsonable(
        {
            "w": torch.tensor([[1.0, float("nan")]], dtype=torch.bfloat16, requires_grad=True),
            "i": torch.arange(3, dtype=torch.int8),
            "scalar": torch.tensor(2.5),
            "dtype": torch.float16,
            "device": torch.device("cpu"),
        }
    )
    assert out == {
        "w": [[1.0, None]],
        "i": [0, 1, 2],
        "scalar": 2.5,
        "dtype": "torch.float16",
        "device": "cpu",
    }


def test_unknown_objects_name_their_type():
    class Opaque:
        pass

    with pytest.raises(TypeError, match="Opaque"):
        to_jsonable({"deep": [Opaque()]})
    with pytest.raises(TypeError, match="complex"):
        to_jsonable(1 + 2j)
    with pytest.raises(TypeError, match="bytes"):
        to_jsonable(b"raw")


def test_finite_floats_pass_unchanged():
    assert to_jsonable(1e-300) == 1e-300
    assert math.isclose(to_jsonable(np.float32(0.1)), 0.1, rel_tol=1e-7)
