"""The batching lab's settings, session, snapshot section and trace events.

A session is one seeded workload (`workload.generate`) run through a `ServingEngine`, one
iteration per `step()`: on the simulated clock by `SimulatedExecutor` (a model config's
roofline time on a hardware preset, the pool what fits beside the weights), or on the wall
clock by a real model (`ModelExecutor`; the tiny model by default, kept small: at most
WALL_MAX_REQUESTS requests, prompts and outputs clipped to WALL_MAX_PROMPT / WALL_MAX_OUTPUT;
prompts given as token ids — a scenario's, a trace's — only to the model's context).
"""

from __future__ import annotations

import time

from inferlab.engines import kernels
from inferlab.engines.fields import Setting, check_settings, read_list, read_object, shown
from inferlab.engines.hardware.presets import list_hardware_presets, load_hardware_preset
from inferlab.engines.kernels import KERNEL_SETTING_CHOICES
from inferlab.engines.kv.block_manager import PREFIX_CACHES, BlockManager
from inferlab.engines.kv.radix_cache import EVICTION_POLICIES
from inferlab.engines.model.cache import load_lab_model, resolve_model_name
from inferlab.engines.model.config import list_model_presets, load_model_preset
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.serve.engine import ServingEngine, requests_from_workload
from inferlab.engines.serve.executors import ModelExecutor, SimulatedExecutor, simulated_pool_blocks
from inferlab.engines.serve.metrics import ServingMetrics, summarize
from inferlab.engines.serve.records import CLOCKS, IterationRecord, RequestInfo
from inferlab.engines.serve.scenarios import (
    SIMULATED_SCENARIO_SCALE,
    WORKLOADS,
    settings_slo,
    workload_items,
)
from inferlab.engines.serve.scheduler import POLICIES, SCHEDULES, Scheduler
from inferlab.engines.trace.snapshot import lab_section, section_field
from inferlab.engines.trace.thinning import keep_every

BATCHING_DEFAULTS = {
    "policy": "continuous",
    "prefix_cache": "hash",  # vLLM v1's default; "radix" is SGLang's tree, "none" off
    "schedule": "fcfs",  # or "lpm": SGLang's longest prefix match first
    "eviction_policy": "lru",  # the radix tree's: or "lfu", "fifo" (SGLang's)
    "scenario": "lognormal",  # or a prefix_workloads scenario: requests that share prefixes
    "clock": "simulated",
    "model_config": "llama-3-8b",  # the simulated clock's model
    "hardware": "h100-sxm",  # the simulated clock's device
    "model": "tiny",  # the wall clock's model (engines.model.cache names)
    "kernels": "auto",  # the wall clock model's kernel path (engines.kernels)
    "requests": 200,
    "rate_per_s": 20.0,
    "prompt_mean": 6.0,  # lognormal, numpy's mean/sigma of the underlying normal: median e^6 ≈ 403
    "prompt_sigma": 0.5,
    "output_mean": 5.0,  # median e^5 ≈ 148 tokens
    "output_sigma": 0.5,
    "seed": 0,
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 128,
    "static_batch_size": 8,
    "slo_ttft_s": 1.0,  # goodput: requests meeting both objectives per second
    "slo_tpot_s": 0.05,
}


def _model_presets():
    return list_model_presets()


def _hardware_presets():
    return list_hardware_presets()


BATCHING_SETTINGS = {  # the view's ranges
    "policy": Setting("str", choices=POLICIES),
    "prefix_cache": Setting("str", choices=PREFIX_CACHES),
    "schedule": Setting("str", choices=SCHEDULES),
    "eviction_policy": Setting("str", choices=EVICTION_POLICIES),
    "scenario": Setting("str", choices=WORKLOADS),
    "clock": Setting("str", choices=CLOCKS),
    "model_config": Setting("str", choices=_model_presets),
    "hardware": Setting("str", choices=_hardware_presets),
    "model": Setting("str"),
    "kernels": Setting("str", choices=KERNEL_SETTING_CHOICES),
    "requests": Setting("int", 1, 100_000),
    "rate_per_s": Setting("float", 0.001, 100_000),
    "prompt_mean": Setting("float", 0, 12),
    "prompt_sigma": Setting("float", 0, 3),
    "output_mean": Setting("float", 0, 12),
    "output_sigma": Setting("float", 0, 3),
    "seed": Setting("int", 0, 2**31 - 1),
    "max_num_batched_tokens": Setting("int", 1, 1_000_000),
    "max_num_seqs": Setting("int", 1, 100_000),
    "static_batch_size": Setting("int", 1, 100_000),
    "slo_ttft_s": Setting("float", 0.000001, 3600),
    "slo_tpot_s": Setting("float", 0.000001, 3600),
}

BLOCK_SIZE = 16
WALL_MAX_REQUESTS, WALL_MAX_PROMPT, WALL_MAX_OUTPUT = 32, 64, 32
ITERATIONS_LIMIT = 50_000
"""A snapshot keeps every iteration up to this many, then every k-th (and the last)."""
METRICS_EVERY_S = 0.25
"""A live session recomputes its metrics at most this often (wall time), and at the end."""


def check_batching_settings(settings, where: str = "settings") -> dict:
    """The settings, strictly checked (ValueError naming the field)."""
    return check_settings(settings, BATCHING_SETTINGS, BATCHING_DEFAULTS, where)


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
            self.model_id, self.device = cfg.id, preset.id
            vocab = cfg.vocab_size
            items = list(items) if items is not None else workload_items(
                settings, vocab, SIMULATED_SCENARIO_SCALE)
        else:
            with kernels.chosen(settings.get("kernels", "auto")):
                model, _tokenizer = load_lab_model(settings["model"], device)
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


def batching_section(settings: dict, requests, iterations, metrics: ServingMetrics | dict,
                     extras: dict | None = None) -> dict:
    """The snapshot's `labs.batching`; huge runs keep every k-th iteration (and the last).
    `extras`: the Compare and Rate sweep results (compare.comparison_state)."""
    if not requests:
        return lab_section(settings, dict(extras or {}), {"iterations": 0})
    n = len(iterations)
    every = keep_every(n, 1, ITERATIONS_LIMIT)
    kept = [r.to_dict() for i, r in enumerate(iterations) if i % every == 0 or i == n - 1]
    state = {"requests": [r.to_dict() for r in requests], "iterations": kept,
             "iterations_every": every, **(extras or {})}
    if isinstance(metrics, ServingMetrics):
        metrics = batching_metrics(metrics, iterations)
    return lab_section(settings, state, metrics)


def read_batching_section(sec: dict):
    """(settings, [RequestInfo], [IterationRecord], metrics dict); ValueError names a bad
    field."""
    where = "labs.batching"
    read_object(sec, where)
    settings = check_batching_settings(section_field(sec, "settings", where), f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    # here, not at the top: every command imports this section at start-up (the registry);
    # the comparison's records and the timeline load with a snapshot or a trace
    from inferlab.engines.labs.batching.compare_records import (
        read_batching_metrics,
        read_comparison_state,
    )

    metrics = read_batching_metrics(section_field(sec, "metrics", where), f"{where}.metrics")

    read_comparison_state(state, f"{where}.state")  # checked here, read by the lab
    if not {"requests", "iterations", "iterations_every"} & state.keys():  # no run, maybe
        return settings, [], [], metrics                                    # a comparison
    w = f"{where}.state"
    requests = read_list(section_field(state, "requests", w), RequestInfo.from_dict,
                         f"{w}.requests")
    iterations = read_list(section_field(state, "iterations", w),
                           IterationRecord.from_dict, f"{w}.iterations")
    ids: set[str] = set()
    for i, r in enumerate(requests):
        if r.request_id in ids:  # the timeline has one row per request
            raise ValueError(f"{w}.requests[{i}].request_id: {shown(r.request_id)} is "
                             f"already the id of an earlier request")
        ids.add(r.request_id)
    for i, it in enumerate(iterations):
        unknown = [rid for rid in (*it.decodes, *(p.request_id for p in it.prefills),
                                   *it.preempted, *it.finished) if rid not in ids]
        if unknown:
            raise ValueError(f"{w}.iterations[{i}]: unknown request {shown(unknown[0])}")
    return settings, requests, iterations, metrics


def batching_trace_iteration(recorder, record: IterationRecord, offset_s: float = 0.0) -> None:
    """One iteration as a span on the run's clock (shifted by `offset_s`, the recorder's time
    when the run started) plus batch-size and KV-usage counters at its end."""
    start, end = offset_s + record.start_s, offset_s + record.end_s
    recorder.add_span(f"iteration {record.index}", start, end, cat="batching",
                      args={"policy": record.policy, "clock": record.clock,
                            "prefill_tokens": record.prefill_tokens,
                            "decode_tokens": record.decode_tokens,
                            "preempted": len(record.preempted)})
    recorder.counter("batch size", {"sequences": record.batch_size,
                                    "prefill tokens": record.prefill_tokens,
                                    "decode tokens": record.decode_tokens}, ts_s=end,
                     cat="batching")
    recorder.counter("KV usage %", {"used": 100 * record.kv_usage}, ts_s=end, cat="batching")
    if record.clock == "wall":  # the simulated clock times the batch alone: no phases
        t = start
        for phase, seconds in (("schedule", record.schedule_s), ("forward", record.forward_s),
                               ("sample", record.sample_s)):
            recorder.add_span(phase, t, t + seconds, cat="batching")
            t += seconds


def batching_trace_requests(recorder, requests, iterations, offset_s: float = 0.0) -> None:
    """Each request on its own track ("request <id>"): one span per state it was in
    (waiting, prefill, decode, preempted, stalled: the timeline's segments)."""
    # here, not at the top: start-up, as in read_batching_section
    from inferlab.engines.labs.batching.timeline import STATE_NAMES, timeline_segments

    segments = timeline_segments(requests, iterations)
    for row, state, start_s, end_s in segments.rows():
        rid = segments.request_ids[row]
        recorder.add_span(STATE_NAMES[state], offset_s + start_s, offset_s + end_s,
                          cat="request", track=f"request {rid}")
