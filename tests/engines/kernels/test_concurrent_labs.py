"""Two labs started at once, in two threads, with different kernel choices: each model runs on
the path it asked for (its layers' layouts, its fused ops, its attention) and computes what it
computes when it runs alone. The path is carried by the model, so nothing process-wide is
flipped while a worker builds one (a switch flipped from each worker could hand one lab the
other's layouts halfway through its model)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from inferlab.engines import kernels
from inferlab.engines.labs.kv.session import kv_run
from inferlab.engines.labs.kv.settings import KV_DEFAULTS
from inferlab.engines.labs.speculative.session import SpeculativeSession
from inferlab.engines.labs.speculative.settings import speculative_defaults
from inferlab.engines.model import cache as model_cache
from inferlab.engines.model.linear import Linear

KV_STEPS = 12
SPECULATIVE_TOKENS = 12


def _kv_lab(path: str):
    session, records = kv_run(dict(KV_DEFAULTS, model="tiny", kernels=path), max_steps=KV_STEPS)
    return session.model, (session.outputs(), [r.step for r in records])


def _speculative_lab(path: str):
    session = SpeculativeSession(dict(speculative_defaults(), model="tiny", drafter="tiny",
                                      kernels=path, max_tokens=SPECULATIVE_TOKENS))
    while not session.done:
        session.step()
    run = session.run()
    draft = session.decoder.drafter.model
    return session.decoder.target, (run.token_ids, [s.n_accepted for s in run.steps], draft)


LABS = {"kv": _kv_lab, "speculative": _speculative_lab}


def _linears(model) -> list:
    return [getattr(lw, n) for lw in model.layers for n in ("qkv", "o", "gate_up", "down")]


def _on_its_path(model, path: str) -> bool:
    """Every layer laid out for `path`, the fused ops and the kernel path with it."""
    native = path == "native"
    return (model.kernel_path == path and (model.glue is not None) == native
            and all(isinstance(lin, Linear) and (lin.layout == "native") == native
                    for lin in [*_linears(model), model.lm_head]))


def _fresh_models(monkeypatch) -> None:
    """An empty model cache, so that each run builds its own model (in its own thread)."""
    monkeypatch.setattr(model_cache, "_cache", {})


@pytest.mark.parametrize("first, second", [(("kv", "native"), ("speculative", "torch")),
                                           (("kv", "torch"), ("speculative", "native")),
                                           (("kv", "native"), ("kv", "torch"))])
def test_two_labs_at_once_each_on_the_path_it_asked_for(monkeypatch, first, second):
    assert kernels.native_available(), "the native library must build here for this test"
    default = kernels.default_path()
    alone = {}
    for lab, path in (first, second):
        _fresh_models(monkeypatch)
        model, result = LABS[lab](path)
        assert _on_its_path(model, path)
        alone[lab, path] = result

    _fresh_models(monkeypatch)
    start = threading.Barrier(2)

    def run(lab_path):
        lab, path = lab_path
        start.wait()  # both build their models at the same time
        return LABS[lab](path)

    for _ in range(2):
        _fresh_models(monkeypatch)
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(run, (first, second)))
        for (lab, path), (model, result) in zip((first, second), results, strict=True):
            assert _on_its_path(model, path), (lab, path)
            if lab == "speculative":
                draft = result[2]
                assert _on_its_path(draft, path)  # the draft model follows its target
                result, expected = result[:2], alone[lab, path][:2]
            else:
                expected = alone[lab, path]
            assert result == expected, (lab, path)
        models = [model for model, _ in results]
        assert models[0] is not models[1]
    assert kernels.default_path() == default  # nothing process-wide was flipped


def test_the_two_paths_differ_where_it_shows():
    """The check above can fail: the two paths' models differ in layout and fused ops, and
    their logits (different kernels, different summation order) are close but not equal."""
    native = model_cache.load_lab_model("tiny", kernels="native")[0]
    reference = model_cache.load_lab_model("tiny", kernels="torch")[0]
    assert _on_its_path(native, "native") and not _on_its_path(native, "torch")
    assert _on_its_path(reference, "torch") and not _on_its_path(reference, "native")
    ids = torch.tensor([5, 9, 33, 2, 7])
    a, b = native.forward_nocache(ids, all_logits=True), reference.forward_nocache(ids, True)
    assert torch.allclose(a, b, atol=1e-4) and not torch.equal(a, b)
