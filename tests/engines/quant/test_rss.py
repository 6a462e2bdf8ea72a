"""The RSS probe runs a model in a fresh process and reports its memory; a model it cannot load
is named in the error."""

from __future__ import annotations

import pytest

from inferlab.engines.quant.rss import model_rss_bytes


def test_rss_of_the_tiny_model_at_8_bits():
    out = model_rss_bytes("tiny", bits=8)
    assert out["rss_bytes"] > out["weight_bytes"] > 0


def test_a_model_it_cannot_load_is_named():
    with pytest.raises(RuntimeError, match="no-such-model at 32 bits failed"):
        model_rss_bytes("no-such-model")
