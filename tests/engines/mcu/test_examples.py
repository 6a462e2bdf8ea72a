"""The shipped TFLM example models (assets/tflite): every file listed with its sha256, the
licence beside them, found through the package (not a path relative to the repository)."""

from __future__ import annotations

import hashlib
import re

import pytest

from inferlab.engines.mcu.examples import default_model, example_models, example_path, examples_dir


def _listed_sha256() -> dict[str, str]:
    text = (examples_dir() / "SOURCES.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| ([a-z0-9_]+\.tflite) \| ([0-9a-f]{64}) \|$", text, re.M))


def test_every_shipped_model_is_listed_with_its_sha256():
    listed = _listed_sha256()
    shipped = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in example_models()}
    assert len(shipped) == 9
    assert shipped == listed


def test_licence_and_origin_ship_beside_the_models():
    licence = (examples_dir() / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "The TensorFlow Authors" in licence
    assert "END OF TERMS AND CONDITIONS" in licence
    sources = (examples_dir() / "SOURCES.md").read_text(encoding="utf-8")
    assert "90b983c2b3f1480642e040bbd2ddb37b998f3424" in sources


def test_folder_is_inside_the_package_and_defaults_resolve():
    import inferlab.assets

    assert examples_dir().parent.resolve() == type(examples_dir())(inferlab.assets.__file__).parent.resolve()
    assert default_model().name == "person_detect.tflite"
    assert example_path("hello_world_int8").stat().st_size == 2704
    with pytest.raises(ValueError, match="hello_world_int8"):
        example_path("no_such_model")
