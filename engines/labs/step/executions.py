"""Each execution's step on the same inputs: the model it runs, a ModelRunner over its own
paged cache filled with the same context, and the step as a callable.

    eager    the model built for torch's ops (kernels="torch"): the reference
    compile  the same eager model with its `forward` under torch.compile (inductor, its
             default mode, with `cpp.enable_kernel_profile` so that each generated kernel
             records a profiler event: the step is seen kernel by kernel, see
             `profile.step_ops`); the context is filled by the eager forward, so only the
             step's own shape is compiled, on its first call (`compile_s`); inductor's on-disk
             cache keeps later processes from compiling it again
    native   the model built for the native kernels: a step the one-call decoder can run goes
             through it (every layer in one C call), the rest on its per-op kernels; its
             native linears called from Python (the lm_head; every linear of a step the decoder
             does not take) each run in a profiler span of their own
             (`profile.native_calls.spanned_model`, over the same weights); the fused small ops
             between them (norms, RoPE, SwiGLU) stay unseen there: their time counts as
             between ops

A decode step runs B sequences' next token over `context` cached tokens each; a prefill step
a prompt of `tokens` tokens. The runner's `forward` writes the step's K/V at the same slots
every call and marks nothing computed, so each call is the same step on the same data.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.profile.native_calls import spanned_model

BLOCK_SIZE = 16
INPUT_SEED = 0
KERNELS = {"eager": "torch", "compile": "torch", "native": "native"}
COMPILE_OPTIONS = {"cpp.enable_kernel_profile": True}
"""Inductor's options for the compiled step (patched for this compile only, not globally): each
generated C++ kernel opens a RecordFunction, which costs next to nothing while no profiler
listens."""

_compiled: dict[int, Callable] = {}  # id(model) -> its compiled forward (models are cached)
_compiled_steps: set[tuple] = set()  # (id(model), step shape) compiled since the last reset
_spanned: dict[int, object] = {}  # id(model) -> the model with its lm_head spanned


def _compiled_forward(model, step_key: tuple) -> Callable:
    """`model.forward` compiled with static shapes (`dynamic=False`: each step shape is its own
    graph, as a deployment compiles its shapes; a dynamic recompile of this model's forward
    fails inside torch 2.13's symbolic shapes). Dynamo keeps at most `recompile_limit` graphs
    per code object and then runs the frame eager without a word, so before a step would pass
    it every compiled graph is dropped (`torch._dynamo.reset()`: only this lab compiles)."""
    key = (id(model), step_key)
    if key not in _compiled_steps and \
            len(_compiled_steps) + 1 >= torch._dynamo.config.recompile_limit:
        torch._dynamo.reset()
        _compiled.clear()
        _compiled_steps.clear()
    _compiled_steps.add(key)
    if id(model) not in _compiled:
        _compiled[id(model)] = torch.compile(model.forward, dynamic=False,
                                             options=COMPILE_OPTIONS)
    return _compiled[id(model)]


class CompiledModel:
    """`model` with `forward` compiled once `compiled` is set (before: the eager forward, so
    filling the context compiles nothing); every other attribute is the model's. `step_key`
    names the step's shape (see `_compiled_forward`)."""

    def __init__(self, model, step_key: tuple) -> None:
        self._model = model
        self._forward = _compiled_forward(model, step_key)
        self.compiled = False

    def forward(self, *args, **kwargs):
        return (self._forward if self.compiled else self._model.forward)(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._model, name)


def step_inputs(settings: dict, vocab_size: int) -> list[list[int]]:
    """Seeded token ids: decode, `batch` sequences of `context` + 1 tokens (the last is the
    step's); prefill, one prompt of `tokens`."""
    gen = torch.Generator().manual_seed(INPUT_SEED)
    if settings["phase"] == "prefill":
        shape = (1, int(settings["tokens"]))
    else:
        shape = (int(settings["batch"]), int(settings["context"]) + 1)
    return torch.randint(0, vocab_size, shape, generator=gen).tolist()


def check_fits(settings: dict, max_position: int, where: str = "settings") -> None:
    """ValueError naming the field where the step would run past the model's context."""
    if settings["phase"] == "prefill":
        if settings["tokens"] > max_position:
            raise ValueError(f"{where}.tokens: {settings['tokens']} is more than the model's "
                             f"context ({max_position})")
    elif settings["context"] + 1 > max_position:
        raise ValueError(f"{where}.context: {settings['context']} + the step's token is more "
                         f"than the model's context ({max_position})")


@dataclass
class PreparedStep:
    """One execution ready to step: `step()` runs it and returns its fp32 logits; `runner`
    holds the cache; `compile_s` the first call's time where it compiled."""

    execution: str
    kernel_path: str
    step: Callable[[], torch.Tensor]
    runner: ModelRunner
    compile_s: float | None = None


def load_execution_model(spec: str, device: str, execution: str):
    """(model, tokenizer) an execution runs; ValueError for the native path off the CPU."""
    if execution == "native" and torch.device(device).type != "cpu":
        raise ValueError(f"executions: native runs on the CPU only, not {device}")
    return load_lab_model(spec, device, kernels=KERNELS[execution])


def prepare(execution: str, model, inputs: list[list[int]], phase: str) -> PreparedStep:
    """A runner over `model` (an execution's, see load_execution_model) with the context in its
    cache, and the step. Compile's first call runs here (timed: `compile_s`)."""
    if execution == "compile":
        wrapped = CompiledModel(model, (phase, len(inputs), len(inputs[0])))
    elif execution == "native":
        if id(model) not in _spanned:
            _spanned[id(model)] = spanned_model(model)
        wrapped = _spanned[id(model)]
    else:
        wrapped = model
    n_tokens = sum(len(ids) for ids in inputs)
    runner = ModelRunner(wrapped, n_blocks=-(-n_tokens // BLOCK_SIZE) + len(inputs),
                         block_size=BLOCK_SIZE, enable_prefix_caching=False)
    for i, ids in enumerate(inputs):
        runner.add(i, ids)
    if phase == "prefill":
        chunks = [(0, 0, len(inputs[0]))]
    else:
        context = len(inputs[0]) - 1
        if context:
            with torch.inference_mode():
                runner.forward([(i, 0, context) for i in range(len(inputs))])
        chunks = [(i, context, 1) for i in range(len(inputs))]

    def step() -> torch.Tensor:
        with torch.inference_mode():
            return runner.forward(chunks)

    prepared = PreparedStep(execution, model.kernel_path, step, runner)
    if execution == "compile":
        wrapped.compiled = True
        start = time.perf_counter()
        step()
        prepared.compile_s = time.perf_counter() - start
    return prepared
