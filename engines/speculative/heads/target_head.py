"""The target's own output head, frozen, over a draft vocabulary: what scores a head's
predicted hidden state (EAGLE) or residual block's output (Medusa).

    draft logits = rms(h) · W[d2t]ᵀ        rms(h) = h / sqrt(mean(h²) + eps) · final_norm

W[d2t] the rows of the target's lm_head at the draft vocabulary's ids, read once as fp32
(from a dense weight, the tied embedding's rows, or the lm_head applied to unit vectors where
it holds codes only). The same tensors train the head and draft with it.
"""

from __future__ import annotations

import torch

from inferlab.engines.model.linear import Linear
from inferlab.engines.model.llama import Llama, rms_norm
from inferlab.engines.speculative.heads.draft_vocab import DraftVocab


def lm_head_rows(target: Llama, ids: torch.Tensor) -> torch.Tensor:
    """The target's lm_head rows at `ids`, fp32 [len(ids), d_model]."""
    head = target.lm_head
    weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor):
        return weight[ids].float().cpu()
    if target.tied:  # a linear of codes read by rows (GGUF): the embedding's rows
        return target.embed[ids.to(target.device)].float().cpu()
    eye = torch.eye(target.config.d_model, dtype=target.dtype, device=target.device)
    return head(eye).float().cpu().T[ids].contiguous()


class FrozenHead:
    """The final norm and the lm_head slice of `target` over `vocab` (fp32, CPU, no grad)."""

    def __init__(self, target: Llama, vocab: DraftVocab) -> None:
        self.vocab = vocab
        self.norm = target.final_norm.float().cpu().clone()
        self.eps = target.config.norm_eps
        self.d_model = target.config.d_model
        self.weight = lm_head_rows(target, vocab.d2t).clone()  # clone: a plain tensor
        # (not an inference-mode one), so training can save it for the backward pass
        """[N, d_model] fp32: the draft vocabulary's rows."""
        self.linear = Linear(self.weight)
        """The same rows in the layout that multiplies fastest here (the native fp32 panels
        where the kernels build: a draft step's product ~3.5x faster than `@` on this
        project's CPUs): drafting, where no gradient flows."""

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Draft logits [..., N] of hidden states [..., d_model] (gradients flow to h)."""
        x = rms_norm(h, (self.d_model,), self.norm, self.eps)
        if torch.is_grad_enabled() and x.requires_grad:
            return x @ self.weight.T
        return self.linear(x.reshape(-1, self.d_model)).reshape(*x.shape[:-1], -1)


def target_embed(target: Llama):
    """`embed(ids) -> [n, d_model]` fp32: the target's input embeddings (frozen, plain
    tensors)."""
    def embed(ids: torch.Tensor) -> torch.Tensor:
        return target.embed_rows(ids.to(target.device)).float().cpu().clone()
    return embed
