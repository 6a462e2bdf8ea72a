"""Input checks the samplers share; each failure is a SpeculativeError naming the parameter."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from inferlab.engines.speculative.errors import SpeculativeError


def check_count(value: int, name: str) -> None:
    """`value` must be an int >= 1 (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpeculativeError(f"{name} must be an integer >= 1, got {value!r}")


def token_tensor(tokens: Sequence[int] | torch.Tensor, name: str) -> torch.Tensor:
    """`tokens` as a 1-d int64 tensor; a bool or a non-integer is refused."""
    if isinstance(tokens, torch.Tensor):
        if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise SpeculativeError(f"{name} must hold integer token ids, got {tokens.dtype}")
        out = tokens.to(torch.int64).cpu()
    else:
        values = list(tokens)
        for t in values:
            try:
                if isinstance(t, bool):
                    raise TypeError
                operator.index(t)  # int, numpy integer, 0-d integer tensor
            except TypeError:
                raise SpeculativeError(f"{name} holds {t!r}, not a token id") from None
        out = torch.tensor([int(t) for t in values], dtype=torch.int64)
    if out.dim() != 1:
        raise SpeculativeError(f"{name} must be 1-d, got shape {tuple(out.shape)}")
    return out


def prob_tensor(probs: torch.Tensor, name: str, rows: int, vocab: int | None) -> torch.Tensor:
    """`probs` [rows, vocab] as float64 on the CPU: finite, >= 0, every row with some mass."""
    if not isinstance(probs, torch.Tensor):
        raise SpeculativeError(f"{name} must be a tensor, got {type(probs).__name__}")
    if probs.dim() != 2 or probs.shape[0] != rows or (vocab is not None
                                                       and probs.shape[1] != vocab):
        want = f"[{rows}, {vocab if vocab is not None else 'V'}]"
        raise SpeculativeError(f"{name} must have shape {want}, got {tuple(probs.shape)}")
    p = probs.detach().double().cpu()
    if not bool(torch.isfinite(p).all()) or bool((p < 0).any()):
        raise SpeculativeError(f"{name} must hold finite probabilities >= 0")
    if bool((p.sum(dim=-1) <= 0).any()):
        raise SpeculativeError(f"{name} has a row with no probability mass")
    return p


def check_vocab(tokens: torch.Tensor, vocab: int, name: str) -> None:
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab):
        raise SpeculativeError(f"{name} holds a token id outside the vocabulary [0, {vocab})")


def uniform_tensor(uniforms: Sequence[float] | torch.Tensor | None, n: int,
                   generator: torch.Generator | None) -> torch.Tensor:
    """The n uniforms in [0, 1) a step uses: the given ones (checked), else fresh ones drawn
    from `generator` (float64, so that they are exactly what the record reports)."""
    if uniforms is None:
        return torch.rand(n, generator=generator, dtype=torch.float64)
    u = torch.as_tensor(uniforms, dtype=torch.float64).cpu()
    if u.shape != (n,):
        raise SpeculativeError(f"uniforms must hold {n} numbers, got shape {tuple(u.shape)}")
    if not bool(((u >= 0) & (u < 1)).all()):
        raise SpeculativeError("uniforms must lie in [0, 1)")
    return u
