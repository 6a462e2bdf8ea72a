"""The target's last hidden states out of a verify forward (`ModelRunner.keep_hidden`): the
logits do not change, and the rows are the residual stream the recomputed reference gives."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.tiny import tiny_model


@pytest.mark.parametrize("kernels", ["native", "torch"])
def test_keep_hidden_leaves_logits_bit_identical(kernels):
    model, tok = tiny_model(kernels=kernels)
    prompt = tok.encode("The lighthouse keeper")
    runs = {}
    for keep in (False, True):
        runner = ModelRunner(model, max_tokens=128, enable_prefix_caching=False)
        runner.keep_hidden = keep
        runner.add("a", prompt)
        out = [runner.step(["a"])]
        runner.append_tokens("a", [5, 6, 7, 8])  # a K + 1 verify forward (several rows)
        out.append(runner.step(["a"], logits=[4]))
        runs[keep] = (out, runner.last_hidden)
    assert runs[False][1] is None
    for a, b in zip(runs[False][0], runs[True][0], strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kernels", ["native", "torch"])
def test_hidden_rows_are_the_last_layer_output(kernels):
    model, tok = tiny_model(kernels=kernels)
    ids = tok.encode("Bread and butter")
    runner = ModelRunner(model, max_tokens=128, enable_prefix_caching=False)
    runner.keep_hidden = True
    runner.add("a", ids[:-3])
    runner.step(["a"])
    first = runner.last_hidden
    runner.append_tokens("a", ids[-3:])
    logits = runner.step(["a"], logits=[3])
    ref = model.layers_nocache(model.embed_rows(torch.tensor(ids)))
    assert first.shape == (len(ids) - 3, model.config.d_model)
    torch.testing.assert_close(torch.cat([first, runner.last_hidden]), ref, rtol=1e-4,
                               atol=1e-4)
    # the head over those rows is exactly what the forward scored
    assert torch.equal(model.head_logits(runner.last_hidden), logits)
