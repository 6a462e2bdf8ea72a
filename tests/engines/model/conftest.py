"""Shared models for the model-runtime tests: loaded once, reused by every test.

torch runs on one thread here: these machines are shared, and multi-threaded BLAS under CPU
contention turns microsecond matmuls into milliseconds-long waits. The previous setting is
restored when this package's tests end.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.torch_fixtures import _one_torch_thread, tiny  # noqa: F401 - fixtures


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_path):
    """(transformers model, transformers tokenizer) from the same GGUF, CPU fp32."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a model hub
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    folder, name = str(smollm2_path.parent), smollm2_path.name
    tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    dtype_kw = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"  # renamed in 4.56
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, **{dtype_kw: torch.float32})
    model.eval()
    return model, tok
