"""The batching lab's session: one seeded workload (`workload.generate`, or a content scenario:
engines/serve/scenarios.py) run through a `ServingEngine`, one iteration per `step()`.

On the simulated clock `SimulatedExecutor` times each batch (a model config's roofline time on
a hardware preset, the pool what fits beside the weights); on the wall clock a real model runs
it (`ModelExecutor`; the tiny model by default, kept small: at most WALL_MAX_REQUESTS requests,
prompts and outputs clipped to WALL_MAX_PROMPT / WALL_MAX_OUTPUT; prompts given as token ids —
a scenario's, a trace's — only to the model's context). Any model the cache loads runs it
(Gemma 3 270M from its codes, tiny-moe's experts); for a model held as a file's codes
`linears_note` says which kernels its linears run on and what a step of more rows than they
take in place costs (`engines.model.linear_costs`; "" otherwise).
"""

from __future__ import annotations

import time

from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.labs.batching.settings import check_batching_settings
from inferlab.engines.model.cache import load_lab_model, resolve_model_name
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.model.linear_costs import linear_paths
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import ModelExecutor, SimulatedExecutor, simulated_pool_blocks
from inferlab.engines.serve.metrics import ServingMetrics, summarize
from inferlab.engines.serve.records import IterationRecord, RequestInfo
from inferlab.engines.serve.scenarios import SIMULATED_SCENARIO_SCALE, settings_slo, workload_items
from inferlab.engines.serve.scheduler import Scheduler

BLOCK_SIZE = 16
WALL_MAX_REQUESTS, WALL_MAX_PROMPT, WALL_MAX_OUTPUT = 32, 64, 32
METRICS_EVERY_S = 0.25
"""A live session recomputes its metrics at most this often (wall time), and at the end."""


def batching_metrics(metrics: ServingMetrics, iterations, prefix_hit_rate: float = 0.0
                     ) -> dict:
    """The serving metrics' dict (seconds) plus iterations, preemptions and the prefix hit
    rate (cached prompt tokens / prompt tokens, over requests at their first scheduling)."""
    return metrics.to_dict() | {"iterations": len(iterations),
                                "preemptions": sum(len(r.preempted) for r in iterations),
                                "prefix_hit_rate": float(prefix_hit_rate)}


def prefix_hit_rate(seqs) -> float:
    """Σ cached prompt tokens / Σ prompt tokens over the sequences scheduled so far (forks,
    which share their parent's prompt, are not counted again)."""
    cached = prompt = 0
    for seq in seqs:
        if seq.num_cached_tokens is not None and seq.parent_id is None:
            cached += seq.num_cached_tokens
            prompt += seq.num_prompt_tokens
    return cached / prompt if prompt else 0.0


class BatchingSession:
    """One run of the lab: `step()` runs the engine to its next iteration and returns its
    record; `done`, `step_index` (iterations so far), `request_infos()`, `timings()`."""

    def __init__(self, settings: dict, device: str = "cpu", items=None) -> None:
        self.settings = settings = check_batching_settings(settings)
        if settings["clock"] == "simulated":
            cfg = load_model_preset(settings["model_config"])
            preset = load_hardware_preset(settings["hardware"])
            blocks = BlockManager(simulated_pool_blocks(cfg, preset, BLOCK_SIZE), BLOCK_SIZE,
                                  prefix_cache=settings["prefix_cache"],
                                  eviction_policy=settings["eviction_policy"])
            executor = SimulatedExecutor(cfg, preset)
            self.model = None  # the roofline's clock: no model runs
            self.linears_note = ""
            self.model_id, self.device = cfg.id, preset.id
            vocab = cfg.vocab_size
            items = list(items) if items is not None else workload_items(
                settings, vocab, SIMULATED_SCENARIO_SCALE)
        else:
            model, _tokenizer = load_lab_model(settings["model"], device,
                                               kernels=settings.get("kernels", "auto"))
            vocab = model.config.vocab_size
            # the seeded stream is cut small for a CPU; a scenario keeps its prompts (what
            # they share is the point), within the model's context
            items = list(items) if items is not None else workload_items(settings, vocab)
            shared = any(w.prompt_token_ids is not None for w in items)
            max_prompt = (model.config.max_position - WALL_MAX_OUTPUT if shared
                          else WALL_MAX_PROMPT)
            items = [w.clipped(max_prompt, WALL_MAX_OUTPUT) for w in items[:WALL_MAX_REQUESTS]]
            need = sum(-(-(w.prompt_tokens + w.output_tokens) // BLOCK_SIZE) for w in items)
            runner = ModelRunner(model, n_blocks=max(need, 1), block_size=BLOCK_SIZE,
                                 prefix_cache=settings["prefix_cache"],
                                 eviction_policy=settings["eviction_policy"])
            blocks = runner.blocks
            executor = ModelExecutor(runner)
            self.model = model
            self.linears_note = linear_paths(model).fallback_note
            self.model_id, self.device = resolve_model_name(settings["model"]), device
        self.items = items
        requests = requests_from_workload(items, vocab)
        scheduler = Scheduler(settings["policy"], blocks,
                              max_num_batched_tokens=settings["max_num_batched_tokens"],
                              max_num_seqs=settings["max_num_seqs"],
                              static_batch_size=settings["static_batch_size"],
                              schedule=settings["schedule"])
        self.engine = ServingEngine(scheduler, executor, requests)
        self._infos = tuple(self.engine.request_infos())
        self._metrics: dict | None = None
        self._metrics_at = 0.0

    @property
    def done(self) -> bool:
        return self.engine.done

    @property
    def step_index(self) -> int:
        return len(self.engine.records)

    @property
    def records(self) -> list[IterationRecord]:
        return self.engine.records

    def step(self) -> IterationRecord:
        """Run to the next iteration (idle time is skipped) and return its record."""
        while not self.engine.done:
            record = self.engine.step()
            if record is not None:
                return record
        raise RuntimeError("the run has ended: there is no iteration left")

    def request_infos(self) -> tuple[RequestInfo, ...]:
        return self._infos

    def timings(self):
        return self.engine.timings()

    def serving_metrics(self) -> ServingMetrics:
        return summarize(self.timings(), slo=settings_slo(self.settings))

    def metrics(self) -> dict:
        """`batching_metrics` of the run so far, recomputed at most every METRICS_EVERY_S."""
        now = time.perf_counter()
        if self._metrics is None or self.done or now - self._metrics_at >= METRICS_EVERY_S:
            self._metrics = batching_metrics(self.serving_metrics(), self.records,
                                             self.prefix_hit_rate())
            self._metrics_at = now
        return self._metrics

    def prefix_hit_rate(self) -> float:
        return prefix_hit_rate(self.engine.scheduler.seqs.values())

    def outputs(self) -> list[dict]:
        """Per request: id, arrival, prompt tokens and how many of them the prefix cache
        supplied (vLLM's num_cached_tokens), output token times and ids (arrival order)."""
        seqs = self.engine.scheduler.seqs
        out = []
        for info, t in zip(self._infos, self.timings(), strict=True):
            seq = seqs.get(info.request_id)
            out.append({"request_id": info.request_id, "arrival_s": t.arrival_s,
                        "prompt_tokens": t.prompt_tokens,
                        "cached_tokens": (seq.num_cached_tokens or 0) if seq else 0,
                        "token_times_s": list(t.token_times_s),
                        "output_token_ids": list(seq.output_ids) if seq else []})
        return out


def batching_session(settings: dict, device: str = "cpu", items=None) -> BatchingSession:
    """A session over `settings` (checked); `items`: WorkloadRequests instead of the seeded
    workload (a trace)."""
    return BatchingSession(settings, device, items)
