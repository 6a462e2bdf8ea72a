"""`inferlab train-head`: trains a head for the tiny model, writes it where it says, prints
its curve; bad settings exit with the field named."""

from __future__ import annotations

import json

import pytest
import torch

from inferlab.app.cli import main
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.speculative.heads.head_file import load_head

pytestmark = pytest.mark.usefixtures("few_training_prompts")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_json_and_the_head_file(tmp_path, capsys):
    out = tmp_path / "h.safetensors"
    code = main(["train-head", "--model", "tiny", "--kind", "medusa", "--epochs", "1",
                 "--medusa-heads", "2", "--max-new-tokens", "8", "--draft-vocab", "64",
                 "--threads", "1", "--out", str(out), "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["path"] == str(out) and data["kind"] == "medusa"
    assert [p["epoch"] for p in data["training"]["curve"]] == [0, 1]
    head = load_head(out, tiny_model()[0])
    assert head.vocab.size == 64 and head.dims.n_medusa == 2


def test_text_output_default_path(tmp_path, capsys):
    assert main(["train-head", "--model", "tiny", "--epochs", "1", "--max-new-tokens", "8",
                 "--second-step-weight", "0.5", "--threads", "1"]) == 0
    text = capsys.readouterr().out
    assert "eagle head for tiny" in text and "tokens/forward" in text
    [path] = (tmp_path / "cache" / "inferlab" / "heads").glob("*/eagle.safetensors")
    assert load_head(path, tiny_model()[0]).training["settings"]["step2_weight"] == 0.5


def test_bad_setting_named(capsys):
    assert main(["train-head", "--model", "tiny", "--epochs", "0"]) == 2
    assert "epochs" in capsys.readouterr().err
