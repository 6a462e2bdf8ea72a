"""`MoESession`: a Mixture-of-Experts model decoding the shipped prompts at batch B, one
decode step at a time, and what each step's routers chose (`MoEStepRecord`); `moe_run` runs
the settings' batch and the B sweep for the window and the headless run alike.

One `step()`:

    1. each sequence's last token is appended; ONE decode forward of the B tokens through the
       paged cache (`ModelRunner.step`, the model's own MoE path: `moe.forward_grouped`),
       timed (`step_s`); meanwhile each MoE layer's router input, the normed hidden states
       h [B, d], is kept (`tapped`)
    2. per MoE layer, on the kept h: the routing again (`moe.route`, the same choice:
       tokens per expert, top-k weights, max / mean, distinct experts), and the grouped
       expert product against the per-token loop (`forward_grouped`, `forward_per_token`),
       each timed once, checked equal
    3. the weights the step read: the dense part and each MoE layer's distinct experts at the
       file's own bytes per expert (`roofline.memory.weights_read_per_step`), beside the same
       with E·(1 − (1 − k/E)^B) experts (`experts_touched`)

Decoding is greedy and never stops early, so every step runs exactly B tokens. A dense model
is refused by name.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from inferlab.engines.cluster.expert_load import imbalance
from inferlab.engines.labs.moe.records import (
    HIST_BINS,
    BatchPoint,
    MoERunInfo,
    MoEStepRecord,
)
from inferlab.engines.model import moe as moe_block
from inferlab.engines.model.cache import holds_codes, load_lab_model
from inferlab.engines.model.llama import DTYPES, Llama, held_bytes, held_params
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.roofline.memory import experts_touched, weights_read_per_step
from inferlab.engines.serve.workload import prompt_texts

BLOCK_SIZE = 16


def moe_model(spec: str, device: str = "cpu", kernels: str = "auto"):
    """(model, tokenizer) of `spec` from the app-wide cache, on the kernel path `kernels` ("auto":
    the process default, native where its library builds); ValueError naming a dense model."""
    model, tok = load_lab_model(spec, device, kernels=kernels)
    cfg = model.config
    if not cfg.is_moe:
        raise ValueError(f"{spec} is a dense model ({cfg.family}, no experts): the MoE lab "
                         "runs a Mixture-of-Experts model (tiny-moe, or a MoE GGUF file or "
                         "Hugging Face folder: Qwen2/3-MoE, Mixtral, OLMoE)")
    return model, tok


def run_info(spec: str, model: Llama) -> MoERunInfo:
    """What `model` holds, as the run records it: its MoE layers and weight bytes."""
    cfg = model.config
    layers = [i for i, lw in enumerate(model.layers) if lw.moe is not None]
    moe = [model.layers[i].moe for i in layers]
    expert = [sum(held_bytes(t) for e in b.experts for t in (e.gate_up, e.down))
              // cfg.n_experts for b in moe]
    params = [held_params(b.experts[0].gate_up) + held_params(b.experts[0].down) for b in moe]
    total = model.weight_bytes
    fmt = "gguf" if holds_codes(model) else \
        next(k for k, v in DTYPES.items() if v == model.dtype)
    active = weights_read_per_step(model.n_params, cfg.n_experts,
                                   [(1, p, cfg.n_experts_active) for p in params])
    return MoERunInfo(
        model=spec, model_name=cfg.name, family=cfg.family, kernel_path=model.kernel_path,
        weight_format=fmt, n_layers=cfg.n_layers, moe_layers=tuple(layers),
        n_experts=cfg.n_experts, top_k=cfg.n_experts_active, params_total=model.n_params,
        params_active=int(active), dense_bytes=total - cfg.n_experts * sum(expert),
        weight_bytes_total=total, expert_bytes=tuple(expert))


class _Tap:
    """A router that keeps a copy of each input (the normed hidden states its experts see)."""

    def __init__(self, router, kept: list[torch.Tensor]) -> None:
        self.router, self.kept = router, kept

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        self.kept.append(h.clone())
        return self.router(h)


@contextmanager
def tapped(model: Llama) -> Iterator[list[list[torch.Tensor]]]:
    """Each MoE layer's router inputs while inside (one list per MoE layer, in layer order);
    the routers are put back on leaving, whatever happens."""
    blocks = [lw.moe for lw in model.layers if lw.moe is not None]
    kept: list[list[torch.Tensor]] = [[] for _ in blocks]
    routers = [b.router for b in blocks]
    try:
        for block, into in zip(blocks, kept, strict=True):
            block.router = _Tap(block.router, into)
        yield kept
    finally:
        for block, router in zip(blocks, routers, strict=True):
            block.router = router


def batch_prompts(tok, n_prompts: int, batch: int, room: int) -> list[list[int]]:
    """`batch` prompts' ids: the first `n_prompts` shipped prompts cycled, each cut to at most
    `room` tokens."""
    texts = prompt_texts()
    texts = [texts[i % len(texts)] for i in range(n_prompts)]
    return [tok.encode(texts[i % n_prompts])[:max(room, 1)] for i in range(batch)]


def _timed(fn: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def layer_routing(model: Llama, block, h: torch.Tensor) -> dict:
    """One MoE layer's choice on `h` [T, d]: tokens per expert, mean weight per rank, the
    top-k weights' histogram, max / mean, distinct experts; and the grouped product against
    the per-token loop on the same h (seconds each, largest difference)."""
    cfg = model.config
    weights, ids = moe_block.route(cfg, block, h)
    counts = torch.bincount(ids.reshape(-1), minlength=cfg.n_experts)
    grouped, grouped_s = _timed(lambda: moe_block.forward_grouped(cfg, block, h))
    per_token, per_token_s = _timed(lambda: moe_block.forward_per_token(cfg, block, h))
    return {"counts": counts.tolist(), "weight_mean": weights.mean(0).tolist(),
            "hist": torch.histc(weights.float(), HIST_BINS, 0.0, 1.0).long(),
            "imbalance": imbalance(counts.numpy()),
            "distinct": moe_block.experts_touched(ids),
            "grouped_s": grouped_s, "per_token_s": per_token_s,
            "diff": float((grouped - per_token).abs().max())}


class MoESession:
    """`batch` sequences of shipped prompts decoding greedily on `model`; `step()` runs one
    decode step and returns its MoEStepRecord."""

    def __init__(self, model: Llama, tok, info: MoERunInfo, batch: int, n_prompts: int,
                 max_steps: int) -> None:
        self.model, self.info, self.batch = model, info, batch
        cfg = model.config
        room = cfg.max_position - max_steps - 1
        prompts = batch_prompts(tok, n_prompts, batch, room)
        blocks = sum(-(-(len(p) + max_steps + 1) // BLOCK_SIZE) for p in prompts)
        self.runner = ModelRunner(model, n_blocks=blocks, block_size=BLOCK_SIZE,
                                  enable_prefix_caching=False)
        self.seqs = list(range(batch))
        for i, p in enumerate(prompts):
            self.runner.add(i, p)
        with torch.inference_mode():
            self.last = self.runner.step(self.seqs).argmax(-1).tolist()  # the prefill
        self.steps_done = 0
        self.hidden: list[torch.Tensor] = []
        """Each MoE layer's router input [B, d] in the latest step (the bench times them)."""

    @torch.inference_mode()
    def step(self) -> MoEStepRecord:
        for i, tok in zip(self.seqs, self.last, strict=True):
            self.runner.append(i, tok)
        with tapped(self.model) as kept:
            start = time.perf_counter()
            logits = self.runner.step(self.seqs)
            step_s = time.perf_counter() - start
        self.last = logits.argmax(-1).tolist()
        self.hidden = [k[-1] for k in kept]
        blocks = [self.model.layers[i].moe for i in self.info.moe_layers]
        layers = [layer_routing(self.model, b, h) for b, h in zip(blocks, self.hidden,
                                                                     strict=True)]
        info, b = self.info, self.batch
        formula = experts_touched(info.n_experts, info.top_k, b)
        measured = weights_read_per_step(info.weight_bytes_total, info.n_experts, [
            (1, size, r["distinct"]) for size, r in zip(info.expert_bytes, layers, strict=True)])
        closed = weights_read_per_step(info.weight_bytes_total, info.n_experts,
                                       [(1, size, formula) for size in info.expert_bytes])
        record = MoEStepRecord(
            step=self.steps_done, batch=b, expert_counts=[r["counts"] for r in layers],
            topk_weight_mean=[r["weight_mean"] for r in layers],
            topk_weight_hist=sum((r["hist"] for r in layers),
                                 torch.zeros(HIST_BINS, dtype=torch.long)).tolist(),
            imbalance_max_over_mean=[r["imbalance"] for r in layers],
            distinct_experts=[r["distinct"] for r in layers],
            distinct_experts_formula=formula, weight_bytes_per_step=int(measured),
            weight_bytes_per_step_formula=closed, step_s=step_s,
            grouped_s=sum(r["grouped_s"] for r in layers),
            per_token_s=sum(r["per_token_s"] for r in layers),
            grouped_max_abs_diff=max(r["diff"] for r in layers))
        self.steps_done += 1
        return record


def batch_point(steps: list[MoEStepRecord]) -> BatchPoint:
    """The sweep's point of one batch: means over its steps (medians of the times)."""
    b = steps[0].batch
    step_s = statistics.median(r.step_s for r in steps)
    return BatchPoint(
        batch=b, steps=len(steps),
        distinct_experts=statistics.fmean(statistics.fmean(r.distinct_experts) for r in steps),
        distinct_experts_formula=steps[0].distinct_experts_formula,
        weight_bytes_per_step=statistics.fmean(r.weight_bytes_per_step for r in steps),
        weight_bytes_per_step_formula=steps[0].weight_bytes_per_step_formula, step_s=step_s,
        tokens_per_s=b / step_s if step_s > 0 else 0.0,
        grouped_s=statistics.median(r.grouped_s for r in steps),
        per_token_s=statistics.median(r.per_token_s for r in steps))


def moe_run(settings: dict, device: str = "cpu",
            on_step: Callable[[MoEStepRecord], None] | None = None,
            should_stop: Callable[[], bool] | None = None):
    """(info, the steps at the settings' batch, the B sweep's points) of checked settings:
    the batch's steps first (each handed to `on_step`), then each sweep batch's (the
    settings' batch reuses its own). `should_stop()` True ends the run where it is."""
    model, tok = moe_model(settings["model"], device, settings["kernels"])
    info = run_info(settings["model"], model)
    n_steps, n_prompts = int(settings["steps"]), int(settings["prompts"])
    stop = should_stop or (lambda: False)

    def decode(batch: int, report) -> list[MoEStepRecord]:
        session = MoESession(model, tok, info, batch, n_prompts, n_steps)
        out = []
        for _ in range(n_steps):
            if stop():
                break
            out.append(session.step())
            if report is not None:
                report(out[-1])
        return out

    steps = decode(int(settings["batch"]), on_step)
    sweep = []
    for b in sorted(set(settings["sweep"])):
        if stop():
            break
        got = steps if b == settings["batch"] else decode(b, None)
        if got:
            sweep.append(batch_point(got))
    return info, steps, sweep
