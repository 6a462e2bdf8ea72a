"""SmolLM2-135M (the real GGUF, fp32): greedy decoding with an EAGLE or a Medusa drafter
equals plain greedy decoding token for token. The heads are trained here, briefly, on a few
training prompts' answers (the drafts are then sometimes accepted, so the roll-back paths
run). Slow: loads the model and runs it on some hundred tokens."""

from __future__ import annotations

import pytest

from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.head_drafter import EagleDrafter, MedusaDrafter
from inferlab.engines.speculative.heads import training_data
from inferlab.engines.speculative.heads.features import build_sequences
from inferlab.engines.speculative.heads.train import TrainSettings, fit
from tests.engines.speculative.heads.helpers import decode_as_plain_greedy

pytestmark = pytest.mark.slow

N_NEW = 40


@pytest.fixture(scope="module")
def sequences(smollm2):
    model, tok = smollm2
    return build_sequences(model, tok, training_data.train_prompts()[:4], {}, 48, 64)


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_greedy_with_a_head_equals_plain_greedy(smollm2, sequences, kind):
    model, tok = smollm2
    head = fit(model, sequences, sequences[:1],
               TrainSettings(kind=kind, epochs=2, window_tokens=64, draft_vocab_size=2048,
                             n_medusa=3, eval_k=3, eval_stride=4))
    drafter = (EagleDrafter if kind == "eagle" else MedusaDrafter)(model, head, tokenizer=tok)
    decoder = SpeculativeDecoder(model, drafter, k=3, tokenizer=tok)
    texts = (training_data.train_prompts()[0], training_data.held_out_prompts()[0])
    _, drafted = decode_as_plain_greedy(model, decoder, [tok.encode_prompt(t) for t in texts],
                                        N_NEW)
    assert drafted > 0
