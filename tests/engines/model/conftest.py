"""Shared models for the model-runtime tests: loaded once, reused by every test.

torch runs on one thread here: these machines are shared, and multi-threaded BLAS under CPU
contention turns microsecond matmuls into milliseconds-long waits. The previous setting is
restored when this package's tests end.
"""

from __future__ import annotations

import os

import pytest
import torch

from inferlab.engines.labs.batching.vllm_peer import hf_folder
from tests.torch_fixtures import _one_torch_thread, tiny  # noqa: F401 - fixtures


@pytest.fixture(scope="session")
def hf_smollm2_folder(smollm2_path, tmp_path_factory):
    """transformers' own conversion of the GGUF to a Hugging Face folder (its GGUF loader
    dequantizes, `save_pretrained` writes safetensors), made once per run: pytest-xdist's
    workers share the folder above their own temporary folders, and the first to ask converts
    it (~20 s) while the others wait on its lock; loading it then takes a fraction of a second
    where loading the GGUF through transformers takes ~15 s in every worker."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    return hf_folder(smollm2_path, torch.float32, cache_root=shared)


@pytest.fixture(scope="session")
def hf_smollm2(hf_smollm2_folder):
    """(transformers model, transformers tokenizer) of the shipped GGUF, CPU fp32."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    folder = str(hf_smollm2_folder)
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    assert model.dtype == torch.float32  # the folder's weights as written
    return model, tok
