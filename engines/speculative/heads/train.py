"""Training a draft head on the target's features (features.py), deterministically.

Each epoch visits every window (windows.py) once, in an order drawn from a generator seeded
`seed`; AdamW with a linear warm-up then a cosine decay to a tenth, gradients clipped at
norm 1. The losses, over the real positions of a batch:

    EAGLE   L = reg_weight · SmoothL1(û_{t+1}, u_{t+1}) + cls_weight · CE(draft logits(û_{t+1}),
            greedy[t+1])                          (EAGLE-1's pair of losses, its weights 1 and
                                                  0.1; u = unit_rms(f); hard greedy labels)
    Medusa  L = Σ_k 0.8^k · CE(draft logits(h_k(u_t)), greedy[t+k]) / Σ_k 0.8^k   (Medusa-1's
            decay per head)

with CE over the draft vocabulary (labels outside it ignored). EAGLE's input features get
uniform noise, u_t + U(-feature_noise, feature_noise) per element (EAGLE-1's U(-0.1, 0.1);
u has RMS 1, so 0.1 is a tenth of a typical element), drawn from the seeded generator: a
head that drafts at depth 2+ reads its own, imperfect, features, and the noise teaches it to
tolerate them. With `step2_weight` > 0 EAGLE also trains its second drafting step
(EAGLE-3's training-time test, eagle.EagleHead.forward_step2): the pairs (û_p, x_{p+1}) made
of its own first-step outputs, reading the real pairs before p, predict u_{p+1} and
greedy[p+1] with the same pair of losses, weighted step2_weight (positions p >= 1). After each epoch the held-out
sequences give the acceptance curve (evaluate.py). Same seed, same data, same settings and
the same torch thread count → the same head, bit for bit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.model.llama import Llama
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.heads.dims import KINDS, HeadDims, constant_dims, unit_rms
from inferlab.engines.speculative.heads.draft_vocab import DraftVocab
from inferlab.engines.speculative.heads.evaluate import chain_acceptance
from inferlab.engines.speculative.heads.features import TrainingSequence
from inferlab.engines.speculative.heads.head_file import TrainedHead, new_module
from inferlab.engines.speculative.heads.model_hash import model_hash
from inferlab.engines.speculative.heads.target_head import FrozenHead, target_embed
from inferlab.engines.speculative.heads.windows import IGNORE, all_windows, make_batch

MEDUSA_DECAY = 0.8


@dataclass(frozen=True)
class TrainSettings:
    kind: str = "eagle"
    seed: int = 0
    epochs: int = 4
    batch_windows: int = 4
    window_tokens: int = 256
    lr: float = 1e-3
    warmup_share: float = 0.05
    draft_vocab_size: int = 8192
    """Clipped to the target's vocabulary (then no restriction)."""
    n_medusa: int = 4
    reg_weight: float = 1.0
    cls_weight: float = 0.1
    feature_noise: float = 0.1
    """EAGLE: half-width of the uniform noise added to the input features (0: none)."""
    step2_weight: float = 1.0
    """EAGLE: weight of the second drafting step's losses (training-time test; 0: off). On
    Gemma 3 270M it lifts the held-out tokens per forward at K = 5 from 1.80 to 2.40 (later
    drafts read the head's own outputs); on SmolLM2 from 1.44 to 1.54 (the bench's open
    answers 1.56 to 1.63), both on the first shipped head's 805-prompt list. It about doubles
    the training time (4 epochs, 2 threads, that list: SmolLM2 259 -> 550 s, Gemma 3 402 ->
    922 s)."""
    eval_k: int = 5
    eval_stride: int = 2
    max_new_tokens: int = 192
    """Features: the longest greedy answer generated per training prompt."""
    max_text_tokens: int = 2048
    """Features: the first this many tokens of each shipped text."""

    def check(self) -> None:
        """SpeculativeError naming the first field out of range."""
        if self.kind not in KINDS:
            raise SpeculativeError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        ints = {"seed": 0, "epochs": 1, "batch_windows": 1, "window_tokens": 2,
                "draft_vocab_size": 1, "n_medusa": 1, "eval_k": 1, "eval_stride": 1,
                "max_new_tokens": 1, "max_text_tokens": 2}
        for name, low in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise SpeculativeError(f"{name} must be an integer >= {low}, got {v!r}")
        for name in ("lr", "reg_weight", "cls_weight", "feature_noise", "step2_weight"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise SpeculativeError(f"{name} must be a finite number >= 0, got {v!r}")
        if not 0 <= self.warmup_share < 1:
            raise SpeculativeError(f"warmup_share must be in [0, 1), got {self.warmup_share!r}")


@dataclass(frozen=True)
class CurvePoint:
    """The state after `epoch` epochs (0: before training)."""

    epoch: int
    steps: int
    train_loss: float | None
    tokens_per_forward: float
    first_token_agreement: float
    elapsed_s: float
    accept_by_position: tuple[float, ...] = ()
    """Held-out P(draft j accepted | drafts before it accepted), j = 1..eval_k (evaluate.py)."""


def point_record(point: CurvePoint) -> dict:
    """A curve point as the head file's JSON keeps it (lists, not tuples)."""
    return {**asdict(point), "accept_by_position": list(point.accept_by_position)}


def _lr_factor(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def _draft_labels(labels: torch.Tensor, t2d: torch.Tensor) -> torch.Tensor:
    """Full-vocabulary labels (or IGNORE) -> draft indices (IGNORE outside the vocabulary)."""
    mapped = t2d[labels.clamp(min=0)]
    return torch.where((labels >= 0) & (mapped >= 0), mapped, torch.full_like(mapped, IGNORE))


def _ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the labelled rows; 0 (with a gradient path) when none is."""
    if not bool((labels != IGNORE).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits, labels, ignore_index=IGNORE)


def _eagle_loss(out, next_feat, labels, valid, scorer, s: TrainSettings) -> torch.Tensor:
    """reg_weight · SmoothL1 + cls_weight · CE over the `valid` positions."""
    pred = out[valid]
    reg = F.smooth_l1_loss(pred, next_feat[valid])
    return s.reg_weight * reg + s.cls_weight * _ce(scorer(pred), labels[valid])


def fit(target: Llama, train_seqs: Sequence[TrainingSequence],
        held_seqs: Sequence[TrainingSequence], settings: TrainSettings = TrainSettings(),
        progress: Callable[[str, int, int, float | None], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_point: Callable[[CurvePoint], None] | None = None) -> TrainedHead:
    """A head trained on `train_seqs`, its curve measured on `held_seqs`. `progress(stage,
    done, total, loss)` after each step; `should_stop` checked before each (Cancelled);
    `on_point` gets each curve point as it is measured."""
    settings.check()
    if not train_seqs:
        raise SpeculativeError("no training sequence: nothing to train on")
    t0 = time.perf_counter()
    s = settings
    vocab_size = target.config.vocab_size
    greedy = torch.cat([q.greedy for q in train_seqs])
    vocab = DraftVocab.most_frequent(greedy, vocab_size, min(s.draft_vocab_size, vocab_size))
    scorer = FrozenHead(target, vocab)
    embed = target_embed(target)
    dims = HeadDims.of(target, s.kind, s.n_medusa)
    module = new_module(dims, s.seed)
    if s.kind == "eagle":
        mask, value = constant_dims(unit_rms(q.hidden.float()) for q in train_seqs)
        module.constant_mask.copy_(mask)
        module.constant_value.copy_(value)
    t2d = vocab.t2d
    n_labels = 1 if s.kind == "eagle" else s.n_medusa
    eval_k = s.eval_k if s.kind == "eagle" else min(s.eval_k, s.n_medusa)
    windows = all_windows(train_seqs, s.window_tokens)
    per_epoch = -(-len(windows) // s.batch_windows)
    total = per_epoch * s.epochs
    warmup = max(1, int(s.warmup_share * total))
    opt = torch.optim.AdamW(module.parameters(), lr=s.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(s.seed)
    weights = [MEDUSA_DECAY ** k for k in range(1, n_labels + 1)]
    curve: list[CurvePoint] = []

    def measure(epoch: int, steps: int, loss: float | None) -> None:
        module.eval()
        acc = chain_acceptance(module, scorer, embed, held_seqs, eval_k, s.eval_stride)
        module.train()
        point = CurvePoint(epoch, steps, loss, acc["tokens_per_forward"],
                           acc["first_token_agreement"], time.perf_counter() - t0,
                           tuple(acc["accept_by_position"]))
        curve.append(point)
        if on_point is not None:
            on_point(point)

    measure(0, 0, None)
    step = 0
    for epoch in range(1, s.epochs + 1):
        order = torch.randperm(len(windows), generator=gen).tolist()
        losses = []
        for first in range(0, len(order), s.batch_windows):
            check_stop(should_stop)
            batch = make_batch(train_seqs, [windows[i] for i in order[first:first + s.batch_windows]],
                               s.window_tokens, n_labels)
            for group in opt.param_groups:
                group["lr"] = s.lr * _lr_factor(step, total, warmup)
            valid = batch.valid
            if s.kind == "eagle":
                feats = batch.feats
                if s.feature_noise > 0:
                    noise = torch.rand(feats.shape, generator=gen) * 2 - 1
                    feats = feats + s.feature_noise * noise
                embeds = embed(batch.next_ids.reshape(-1)).view_as(batch.feats)
                out = module(feats, embeds)
                labels = _draft_labels(batch.labels[0], t2d)
                loss = _eagle_loss(out, batch.next_feat, labels, valid, scorer, s)
                if s.step2_weight > 0:
                    feats2 = torch.cat([feats[:, :1], out[:, :-1]], dim=1)
                    out2 = module.forward_step2(feats, embeds, feats2, embeds)
                    valid2 = valid.clone()
                    valid2[:, 0] = False  # position 0 has no first-step output before it
                    loss = loss + s.step2_weight * _eagle_loss(out2, batch.next_feat, labels,
                                                               valid2, scorer, s)
            else:
                hk = module(batch.feats[valid])
                loss = sum(w * _ce(scorer(hk[k]), _draft_labels(batch.labels[k][valid], t2d))
                           for k, w in enumerate(weights)) / sum(weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
            opt.step()
            step += 1
            losses.append(float(loss.detach()))
            if progress is not None:
                progress("train", step, total, losses[-1])
        measure(epoch, step, sum(losses) / len(losses))
    module.eval()
    held_greedy = torch.cat([q.greedy for q in held_seqs]) if held_seqs else greedy[:0]
    training = {"settings": asdict(s), "curve": [point_record(p) for p in curve],
                "train_sequences": len(train_seqs), "train_tokens": int(greedy.numel()),
                "held_out_sequences": len(held_seqs), "steps": step,
                "draft_vocab_coverage_train": vocab.coverage(greedy),
                "draft_vocab_coverage_held_out": vocab.coverage(held_greedy),
                "train_s": time.perf_counter() - t0,
                "torch_threads": torch.get_num_threads()}
    return TrainedHead(s.kind, dims, module, vocab, model_hash(target), training)
