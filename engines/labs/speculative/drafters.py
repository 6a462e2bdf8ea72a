"""The drafter a speculative lab setting names (`make_drafter`), built for its target."""

from __future__ import annotations

from inferlab.engines.labs.speculative.settings import parse_drafter


def make_drafter(spec: str, model, tokenizer, sampling, seed: int, max_tokens: int,
                 device: str = "cpu"):
    """The drafter `spec` names for target `model` (SpeculativeError when it cannot be)."""
    from inferlab.engines.speculative.model_drafter import LayerSkipDrafter, ModelDrafter
    from inferlab.engines.speculative.ngram import NgramDrafter

    kind, n = parse_drafter(spec)
    if kind == "ngram":
        return NgramDrafter()
    if kind == "layerskip":
        return LayerSkipDrafter(model, n, settings=sampling, seed=seed, tokenizer=tokenizer,
                                max_tokens=max_tokens)
    if kind == "quant":
        from inferlab.engines.speculative.model_drafter import quantized_self_draft

        return ModelDrafter(quantized_self_draft(model, n), settings=sampling, seed=seed,
                            tokenizer=tokenizer, max_tokens=max_tokens, name=spec)
    from inferlab.engines.model.tiny import tiny_model

    draft, draft_tok = tiny_model(seed=1, n_layers=1, device=device)
    return ModelDrafter(draft, settings=sampling, seed=seed, tokenizer=draft_tok,
                        max_tokens=max_tokens, name="tiny")
