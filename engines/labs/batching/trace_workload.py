"""A published trace as the batching lab's workload (engines/serve/traces/replay.py), with the
vocabulary and tokenizer of the run's model: `run batching --trace` and the lab's Trace tab
("Run the lab on it") both read a trace through here."""

from __future__ import annotations

from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.traces import replay


def trace_vocabulary(settings: dict, device: str) -> tuple[int, object | None]:
    """(vocabulary size prompts are drawn from, tokenizer ShareGPT's text is counted with):
    the simulated model's size and no tokenizer (none ships for a preset: the estimate), or
    the real model's own."""
    if settings["clock"] == "simulated":
        return load_model_preset(settings["model_config"]).vocab_size, None
    model, tokenizer = load_lab_model(settings["model"], device)
    return model.config.vocab_size, tokenizer


def trace_workload(path, settings: dict, device: str = "cpu", fmt: str | None = None, *,
                   window: str | None = None, time_scale: float = 1.0,
                   sample: int | None = None, seed: int = 0, limit: int | None = None,
                   progress=None) -> tuple[list, dict]:
    """(WorkloadRequests, figures): replay.trace_workload for the run's model."""
    vocab_size, tokenizer = trace_vocabulary(settings, device)
    return replay.trace_workload(path, fmt, window, time_scale, sample, seed, vocab_size,
                                 limit=limit, progress=progress, tokenizer=tokenizer)
