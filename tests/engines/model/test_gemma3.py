"""Gemma 3 270M, the real file: our fp32 greedy tokens equal transformers' on the same GGUF, on
a short prompt and one longer than the sliding window (512 tokens); the codes path agrees with
the fp32 one.

transformers' tokens are recorded in data/gemma3_transformers_greedy.json by
make_gemma3_reference.py (its own fp32 model of the file takes about a minute to load);
the prompts are rebuilt here and must equal the recorded ones.
"""

import json
from pathlib import Path

import pytest
import torch

from inferlab.engines.model.generate import generate

from .make_gemma3_reference import NEW_TOKENS, reference_prompts

pytestmark = pytest.mark.slow
REFERENCE = json.loads((Path(__file__).parent / "data" /
                        "gemma3_transformers_greedy.json").read_text())


@pytest.fixture(scope="module")
def gemma():
    from inferlab.engines.model.registry import load_model

    try:
        return load_model("gemma3-270m", weights="fp32")
    except ValueError as e:  # the package is not installed
        pytest.skip(str(e))


def test_prompts_are_the_recorded_ones_with_the_files_bos(gemma):
    _, tok = gemma
    prompts = reference_prompts(tok)
    assert prompts == REFERENCE["prompts"] and NEW_TOKENS == REFERENCE["new_tokens"]
    assert all(p[0] == 2 for p in prompts) and len(prompts[1]) > 512  # past the window


def test_fp32_greedy_equals_transformers(gemma):
    model, _ = gemma
    got = generate(model, REFERENCE["prompts"], max_new_tokens=NEW_TOKENS).generations
    assert [list(g.token_ids) for g in got] == REFERENCE["greedy"]


def test_codes_path_agrees_with_fp32(gemma):
    from inferlab.engines.model.registry import load_model

    fp32, _ = gemma
    codes, _ = load_model("gemma3-270m")
    assert codes.weight_bytes < fp32.weight_bytes / 3  # the file's blocks, not fp32
    ids = torch.tensor(REFERENCE["prompts"][1][:600])
    a, b = fp32.forward_nocache(ids), codes.forward_nocache(ids)
    assert int(a.argmax()) == int(b.argmax())
    assert (a - b).abs().max() < 1e-3 * a.abs().max()
