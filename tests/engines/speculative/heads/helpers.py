"""The tiny model's training data for the head tests: its own greedy answers (byte tokens)."""

from __future__ import annotations

from inferlab.engines.speculative.heads.features import build_sequences

TRAIN_PROMPTS = ("The ferry", "A lamp in the", "Bread and", "Keep the tide", "Over the hill",
                 "Letters from")
HELD_PROMPTS = ("Notes on a bee", "The canal at")
NEW_TOKENS = 48


def tiny_sequences(model, tok, prompts=TRAIN_PROMPTS, texts=None):
    return build_sequences(model, tok, prompts, texts or {}, NEW_TOKENS, 256)


def decode_as_plain_greedy(model, decoder, prompts_ids, n_new: int) -> tuple[int, int]:
    """Each prompt (token ids) decoded by the speculative `decoder` equals plain greedy
    generation token for token (asserted); (drafts accepted, drafts made) over them."""
    from inferlab.engines.model.generate import generate

    accepted = drafted = 0
    for ids in prompts_ids:
        ref = generate(model, [ids], max_new_tokens=n_new).generations[0].token_ids
        run = decoder.generate(ids, n_new)
        assert run.token_ids == tuple(ref), ids
        accepted += sum(sum(s.accepted) for s in run.steps)
        drafted += sum(len(s.drafted) for s in run.steps)
    return accepted, drafted
