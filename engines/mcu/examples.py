"""The TensorFlow Lite Micro example models InferLab ships (`assets/tflite`, package data).

The MCU lab's model list, the CLI's defaults, `bench mcu` and the tests all find them here, so
an installed InferLab or a fresh clone has them; their origin, licence and sha256 are in
`assets/tflite/SOURCES.md`.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

DEFAULT_MODEL_STEMS = ("person_detect", "micro_speech_quantized", "hello_world_int8")
"""The MCU lab's default model: the first of these that is shipped."""


def examples_dir() -> Path:
    """The folder holding the shipped `.tflite` files (a real folder: installs are unzipped)."""
    return Path(str(importlib.resources.files("inferlab.assets") / "tflite"))


def example_models() -> list[Path]:
    """Every shipped `.tflite` file, sorted by name."""
    return sorted(examples_dir().glob("*.tflite"))


def example_path(stem: str) -> Path:
    """The shipped model `stem` (e.g. "person_detect"); ValueError names the ones there are."""
    path = examples_dir() / f"{stem}.tflite"
    if not path.is_file():
        names = ", ".join(p.stem for p in example_models())
        raise ValueError(f"no shipped example model {stem!r}; there are: {names}")
    return path


def model_argument(text: str) -> str:
    """A command line's MODEL.tflite: a file, or a shipped example's name (`person_detect` or
    `person_detect.tflite`, when no such file exists): its path then.

    Anything else is passed on as it is, so that opening it fails with the one-line error
    every command prints (argparse, given a type error, would add its usage lines)."""
    path = Path(text)
    if path.is_file() or path.parent != Path("."):
        return text
    stem = path.name[: -len(".tflite")] if path.name.endswith(".tflite") else path.name
    try:
        return str(example_path(stem))
    except ValueError:
        return text


def default_model() -> Path:
    """The MCU lab's default model: person_detect, else micro_speech, else hello_world."""
    for stem in DEFAULT_MODEL_STEMS:
        path = examples_dir() / f"{stem}.tflite"
        if path.is_file():
            return path
    raise FileNotFoundError(f"no example model in {examples_dir()}: the install is incomplete")
