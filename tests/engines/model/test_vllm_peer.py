"""The batching bench's vLLM peer (engines/labs/batching/vllm_peer.py): not run, and said so,
without INFERLAB_VLLM_PYTHON; a Python without vllm ends in vLLM's own import error, not a
hang; the Hugging Face folder it serves holds the GGUF's model (transformers' logits from the
folder equal those from the GGUF). With INFERLAB_VLLM_PYTHON set, vLLM itself gives our greedy
tokens on the bench's prompts."""

from __future__ import annotations

import contextlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from inferlab.engines.labs.batching.concurrent_bench import (
    _vllm_peer,
    bench_prompts,
    run_continuous,
)
from inferlab.engines.labs.batching.vllm_peer import VLLM_PYTHON_ENV, VllmPeer, hf_folder


def test_peer_is_not_run_without_its_python(monkeypatch):
    monkeypatch.delenv(VLLM_PYTHON_ENV, raising=False)
    out: dict = {}
    with contextlib.ExitStack() as stack:
        assert _vllm_peer(stack, [[1, 2, 3]], 4, "fp32", out) is None
    assert VLLM_PYTHON_ENV in out["vllm_cpu_error"] and "not run" in out["vllm_cpu_error"]


def test_a_python_without_vllm_fails_with_its_import_error(tmp_path):
    with pytest.raises(RuntimeError, match=r"exited \(code 1\).*No module named 'vllm'"):
        VllmPeer(sys.executable, tmp_path, "float32", 1, max_model_len=64, max_num_seqs=2)


@pytest.mark.slow
def test_the_converted_folder_holds_the_gguf_model(smollm2, smollm2_path, hf_smollm2_folder):
    import transformers

    folder = hf_smollm2_folder
    assert (folder / "config.json").is_file() and not folder.with_name(
        folder.name + ".partial").exists()
    stamp = (folder / "config.json").stat().st_mtime_ns
    # cached, not converted again
    assert hf_folder(smollm2_path, torch.float32, cache_root=folder.parents[1]) == folder
    assert (folder / "config.json").stat().st_mtime_ns == stamp
    # transformers' conversion against our own GGUF reader (gguf's dequantizer, our model)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    model, tok = smollm2
    ids = tok.encode("The lighthouse keeper climbed the stairs")
    with torch.inference_mode():
        theirs = reloaded(torch.tensor([ids])).logits[0]
    ours = model.forward_nocache(torch.tensor(ids), all_logits=True)
    assert (ours - theirs).abs().max().item() < 1e-3
    folder_tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    for text in ("lighthouse keeper", "Why is the sky blue? 42 × 7", "  spaces\tand\nlines"):
        assert folder_tok.encode(text) == tok.encode(text), text


@pytest.mark.slow  # transformers: its import and a conversion
def test_one_conversion_when_several_ask_at_once(tmp_path, monkeypatch):
    from inferlab.engines.labs.batching import vllm_peer
    from tests.engines.model.model_files import write_tiny_gguf

    gguf_path = write_tiny_gguf(tmp_path / "tiny.gguf")
    converted = []
    real_load = vllm_peer.load_transformers_gguf

    def counting_load(path, dtype):
        converted.append(path)
        return real_load(path, dtype)

    monkeypatch.setattr(vllm_peer, "load_transformers_gguf", counting_load)
    cache = tmp_path / "cache"
    leftover = cache / "hf" / f"tiny-{gguf_path.stat().st_size}-float32.partial"
    leftover.mkdir(parents=True)  # a conversion killed half-way
    (leftover / "model.safetensors").write_bytes(b"cut short")
    with ThreadPoolExecutor(3) as pool:
        folders = list(pool.map(lambda _: hf_folder(gguf_path, torch.float32, cache), range(3)))
    assert len(set(folders)) == 1 and converted == [gguf_path]
    assert not leftover.exists()
    reloaded = transformers_folder_model(folders[0])
    assert reloaded.config.vocab_size == 258


def transformers_folder_model(folder):
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(str(folder)).eval()


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get(VLLM_PYTHON_ENV),
                    reason=f"{VLLM_PYTHON_ENV} names no Python with vllm (an optional peer)")
def test_vllm_gives_our_greedy_tokens(smollm2):
    model, tok = smollm2
    prompts = [tok.encode_prompt(text) for text in bench_prompts(3)]
    out: dict = {}
    with contextlib.ExitStack() as stack:
        peer = _vllm_peer(stack, prompts, 6, "fp32", out)
        assert peer is not None, out
        wall_s, theirs = peer.generate(prompts, 6)
    assert wall_s > 0 and [len(t) for t in theirs] == [6, 6, 6]
    assert run_continuous(model, prompts, 6)[1] == theirs


def test_a_peers_figures_by_hand():
    from inferlab.engines.labs.batching.concurrent_bench import _peer_figures

    keys = ("rate", "ratio", "equal")
    got = _peer_figures(300.0, 600, [[1], [2], [3]], [3.0, 1.0, 2.0], [[1], [9], [3]], *keys)
    assert got == {"rate": 300.0, "ratio": 1.0, "equal": 2}  # 600 tokens / median 2 s
    assert _peer_figures(300.0, 600, [[1]], [], None, *keys) == {"rate": None, "ratio": None}


def test_a_peer_that_never_answers_is_a_timeout_not_a_hang(tmp_path, monkeypatch):
    from inferlab.engines.labs.batching import vllm_peer

    stalled = tmp_path / "python"
    stalled.write_text("#!/bin/sh\nexec sleep 600\n")
    stalled.chmod(0o755)
    monkeypatch.setattr(vllm_peer, "START_TIMEOUT_S", 0.5)
    with pytest.raises(RuntimeError, match=r"gave no answer in 0\.5 s"):
        VllmPeer(str(stalled), tmp_path, "float32", 1, max_model_len=64, max_num_seqs=2)


def test_a_peer_that_dies_mid_run_is_named_and_dropped(tmp_path):
    from inferlab.engines.labs.batching.concurrent_bench import _peer_generate

    dies = tmp_path / "python"  # ready, then gone at its first batch
    dies.write_text("#!/bin/sh\necho '{\"ready\": true, \"version\": \"0\"}'\n"
                    "read line\necho 'killed by the OOM killer' >&2\nexit 3\n")
    dies.chmod(0o755)
    out: dict = {}
    with VllmPeer(str(dies), tmp_path, "float32", 1, max_model_len=64, max_num_seqs=2) as peer:
        assert peer.version == "0"
        assert _peer_generate(peer, [[1, 2]], 4, out) is None
    assert out["vllm_cpu_error"] == ("vLLM peer failed mid-run: vLLM peer exited (code 3): "
                                     "killed by the OOM killer")
