"""Which layers a training-free self-draft skips (`skip:auto`): searched on calibration text.

A model not trained for early exit (SmolLM2) rarely agrees at its 8th layer with its last,
but leaving out a chosen *set* of intermediate layers keeps much of its agreement (Draft &
Verify; SWIFT). The search is greedy, as Draft & Verify's is: starting from no layer
skipped, each round tries every intermediate layer still run and skips the one whose loss
keeps the most agreement; it stops when agreement falls below `min_alpha`, after
`max_skipped` layers (half of them by default) or after `patience` rounds in a row without
a better predicted speedup. Of the sets on that path it keeps the one with the largest predicted
speedup

    max over K in 1..k_max of  E(K; α) / (K · c + v(K))     (engines.speculative.statistics)

with α the set's greedy acceptance measured on the text and c its draft cost.

α: the share of positions where the draft's argmax equals the target's, both reading the
same text (teacher forced). Greedy verification accepts a draft exactly when the two agree
after the target's own tokens, so on text the target itself wrote this is the greedy
acceptance rate; on other text it is its estimate.
c: the bytes of weights the draft reads per token over the target's (decode is memory
bound: the runtime bench reads `decode_bandwidth_fraction` ~1), lm_head included: a
SmolLM2 draft skipping every layer still reads 21% of the target.

Each round resumes from the hidden state at the candidate layer's input (the layers before
it are those of the set so far), so a round costs about half a forward per candidate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from inferlab.engines.model.llama import Llama, held_bytes
from inferlab.engines.speculative.adaptive_k import DEFAULT_VERIFY_SLOPE
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.model_drafter import check_skipped, sub_model
from inferlab.engines.speculative.statistics import speedup_model

CACHE_VERSION = 1


@dataclass(frozen=True)
class SkipChoice:
    skipped: tuple[int, ...]
    alpha: float
    draft_cost: float
    k: int
    predicted_speedup: float
    first_layers_alpha: float
    """The agreement of `layerskip:N` at the same draft cost (the first N layers, N the
    number this set keeps): what a set buys over a cut."""


@dataclass(frozen=True)
class SkipSearch:
    best: SkipChoice
    path: tuple[SkipChoice, ...]
    """Every set the greedy search passed through, one more layer skipped each."""
    tokens: int
    """Calibration tokens scored."""


def layer_bytes(target: Llama, i: int) -> int:
    """Bytes of layer i's weights one token reads: its norms and linears; in a
    Mixture-of-Experts layer the router, the shared expert and k of its E routed experts
    (k/E of their bytes: the mean share a token reads)."""
    lw = target.layers[i]
    dense = sum(held_bytes(t) for t in (lw.attn_norm, lw.qkv, lw.o, lw.mlp_norm, lw.gate_up,
                                        lw.down) if t is not None)
    moe = lw.moe
    if moe is None:
        return dense
    c = target.config
    routed = sum(held_bytes(t) for e in moe.experts for t in (e.gate_up, e.down))
    always = [moe.router] + ([moe.shared.gate_up, moe.shared.down] if moe.shared else []) + \
        ([moe.shared_gate] if moe.shared_gate is not None else [])
    return dense + sum(held_bytes(t) for t in always) + \
        routed * c.n_experts_active // c.n_experts


def draft_cost(target: Llama, skipped: Sequence[int]) -> float:
    """Weight bytes the draft reads per token over the target's (embedding rows aside)."""
    read = held_bytes(target.lm_head) + sum(layer_bytes(target, i)
                                       for i in range(target.config.n_layers))
    return 1.0 - sum(layer_bytes(target, i) for i in skipped) / read


def best_k(alpha: float, cost: float, k_max: int, verify_slope: float) -> tuple[int, float]:
    """(K, predicted speedup) maximising E(K) / (K c + v(K)) with v(K) = 1 + slope · K."""
    return max(((k, speedup_model(alpha, k, cost, 1.0 + verify_slope * k))
                for k in range(1, k_max + 1)), key=lambda kv: kv[1])


def search_skip_set(target: Llama, texts: Sequence[torch.Tensor], k_max: int = 8,
                    verify_slope: float = DEFAULT_VERIFY_SLOPE, min_alpha: float = 0.3,
                    max_skipped: int | None = None, patience: int = 3) -> SkipSearch:
    """The greedy search of the module doc over token sequences `texts` (1-D id tensors)."""
    n = target.config.n_layers
    if n < 3:
        raise SpeculativeError(f"skip:auto skips intermediate layers: a {n}-layer target has "
                               "none")
    texts = [t for t in texts if t.numel() >= 2]
    if not texts:
        raise SpeculativeError("skip:auto needs calibration text of at least 2 tokens")
    embedded = [target.embed_rows(t.to(target.device)) for t in texts]
    full = _layer_inputs(target, embedded, set())
    want = [target.head_logits(h[:-1]).argmax(-1) for h in full[n]]
    n_tokens = sum(int(w.numel()) for w in want)
    limit = min(n // 2 if max_skipped is None else max_skipped, n - 2)

    def agreement(hs: list[torch.Tensor]) -> float:
        """Share of positions where the head over the final hidden states `hs` gives the
        target's argmax."""
        return sum(int((target.head_logits(h[:-1]).argmax(-1) == w).sum())
                   for h, w in zip(hs, want, strict=True)) / n_tokens

    def alpha_from(start: int, xs: list[torch.Tensor], skipped: set[int]) -> float:
        """Agreement of the layers from `start` on not in `skipped`, resuming from `xs`."""
        model = sub_model(target, [target.layers[i] for i in range(start, n)
                                   if i not in skipped], "search", "search")
        return agreement([model.layers_nocache(x) for x in xs])

    def choice(skipped: set[int], alpha: float) -> SkipChoice:
        cost = draft_cost(target, sorted(skipped))
        k, speedup = best_k(alpha, cost, k_max, verify_slope)
        first = agreement(full[n - len(skipped)])  # layerskip keeping as many layers
        return SkipChoice(tuple(sorted(skipped)), alpha, cost, k, speedup, first)

    skipped: set[int] = set()
    path: list[SkipChoice] = []
    stale = 0
    while len(skipped) < limit and stale < patience:
        inputs = _layer_inputs(target, embedded, skipped)
        scored = []
        for cand in range(1, n - 1):
            if cand in skipped:
                continue
            scored.append((alpha_from(cand, inputs[cand], skipped | {cand}), cand))
        alpha, cand = max(scored)
        if alpha < min_alpha and path:  # the first round is kept whatever it scores
            break
        skipped.add(cand)
        path.append(choice(skipped, alpha))
        best_so_far = max(c.predicted_speedup for c in path)
        stale = 0 if path[-1].predicted_speedup >= best_so_far else stale + 1
    best = max(path, key=lambda c: c.predicted_speedup)
    return SkipSearch(best, tuple(path), n_tokens)


def _layer_inputs(target: Llama, embedded: list[torch.Tensor], skipped: set[int]
                  ) -> list[list[torch.Tensor]]:
    """The hidden states at each layer's input (and after the last: index n), per text, with
    the layers in `skipped` left out."""
    out = [embedded]
    for i in range(target.config.n_layers):
        if i in skipped:
            out.append(out[-1])
            continue
        layer = sub_model(target, [target.layers[i]], "one", "one")
        out.append([layer.layers_nocache(x) for x in out[-1]])
    return out


def cache_key(target: Llama, texts: Sequence[torch.Tensor], search_kw: dict) -> str:
    """A key that changes with the model's weights' identity, the text and every setting of
    the search (`search_skip_set`'s keywords as given)."""
    h = hashlib.sha256()
    c = target.config
    h.update(f"{CACHE_VERSION}|{c.id}|{c.n_layers}|{target.dtype}|{target.weight_bytes}|"
             f"{sorted(search_kw.items())}".encode())
    h.update(target.final_norm.float().numpy().tobytes())
    for t in texts:
        h.update(t.to(torch.int64).numpy().tobytes())
    return h.hexdigest()[:20]


def cached_search(target: Llama, texts: Sequence[torch.Tensor], cache: Path, **kw
                  ) -> SkipSearch:
    """`search_skip_set`, its result kept in `cache`/skip_auto/<key>.json (a file that does
    not read back as a result is searched again and rewritten)."""
    key = cache_key(target, texts, kw)
    path = cache / "skip_auto" / f"{key}.json"
    try:
        found = _read(json.loads(path.read_text(encoding="utf-8")))
        check_skipped(target, found.best.skipped)
        return found
    except (OSError, ValueError, TypeError, KeyError, SpeculativeError):
        pass
    result = search_skip_set(target, texts, **kw)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(result)), encoding="utf-8")
    tmp.replace(path)
    return result


def _choice(d: dict) -> SkipChoice:
    return SkipChoice(tuple(int(i) for i in d["skipped"]), float(d["alpha"]),
                      float(d["draft_cost"]), int(d["k"]), float(d["predicted_speedup"]),
                      float(d["first_layers_alpha"]))


def _read(d: dict) -> SkipSearch:
    return SkipSearch(_choice(d["best"]), tuple(_choice(c) for c in d["path"]),
                      int(d["tokens"]))
