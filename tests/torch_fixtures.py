"""Fixtures shared by the packages whose tests run torch models (imported by their conftests).

torch runs on one thread there: these machines are shared, and multi-threaded BLAS under CPU
contention turns microsecond matmuls into millisecond waits. The previous setting is
restored when the package's tests end.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="package", autouse=True)
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the seeded tiny model, fp32."""
    from inferlab.engines.model.tiny import tiny_model

    return tiny_model()


TINY_GEMMA3 = dict(id="tiny-gemma3", family="gemma3_text", mlp_kind="geglu", post_norms=True,
                   qk_norm="head", norm_offset=1.0, n_layers=3,
                   layer_types=("sliding", "full", "sliding"), sliding_window=8,
                   rope_local_theta=10000.0, embed_scale=8.0, tie_embeddings=True)
"""`tiny_model(**TINY_GEMMA3)`: the tiny model laid out as Gemma 3 is (GeGLU, q/k-norms, norms
after attention and after the MLP, (1 + w) norms, sliding layers of an 8-token window with
their own RoPE base, embeddings scaled by √d, tied head): what a lab must do as Gemma 3 270M
does, in milliseconds."""
