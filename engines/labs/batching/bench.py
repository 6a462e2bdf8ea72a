"""The batching lab's engine figures, in one run (`inferlab bench batching` adds the timeline's
render and update times, app/benches/batching_view.py):

    throughput_ratio                  continuous / static output tokens/s, the same seeded
                                      workload, simulated clock (Llama-3-8B on an H100)
    {continuous,static}_ttft_p99_s    p99 TTFT and TPOT of each policy
    {continuous,static}_tpot_p99_s
    simulated_requests_per_s_of_wall  requests the simulator gets through per wall second
                                      (engine.bench_simulator)
    scheduler_overhead_frac           the scheduler's host time / iteration time, decode
                                      iterations at 64 running sequences, the tiny model
    cost_model_error_median / _p90    |roofline prediction - measured| / measured per
                                      iteration of a wall-clock SmolLM2 run, the cost model
                                      on this device's measured roofs (serve/calibration.py)
    profiled_cost_model_error_...     the same for ProfiledCostModel (this device's measured
                                      forwards of the model, interpolated)

The real-model figures (calibration, and `concurrent_bench`'s 32 requests against
transformers) take minutes; `real=False` leaves them out.
"""

from __future__ import annotations

from inferlab.engines.hardware.microbench import measure_roofs
from inferlab.engines.labs.batching.concurrent_bench import run_concurrent_bench
from inferlab.engines.labs.batching.session import batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS
from inferlab.engines.model.cache import load_lab_model
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.serve import workload as wl
from inferlab.engines.serve.calibration import (
    PredictingExecutor,
    ProfiledCostModel,
    prediction_errors,
)
from inferlab.engines.serve.engine import ServingEngine, bench_simulator, requests_from_workload
from inferlab.engines.serve.executors import ModelExecutor, SimulatedExecutor
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import Scheduler


def policy_metrics(settings: dict):
    session = batching_session(settings)
    while not session.done:
        session.step()
    return session.serving_metrics()


def scheduler_overhead(n_running: int = 64, output_tokens: int = 48) -> dict:
    """The scheduler's share of decode iterations with `n_running` sequences, tiny model."""
    model, _ = load_lab_model("tiny")
    prompt_tokens = 16
    requests = [Request(f"r{i}", [(7 * i + j) % 200 + 1 for j in range(prompt_tokens)],
                        output_tokens) for i in range(n_running)]
    per_seq = -(-(prompt_tokens + output_tokens) // 16)
    runner = ModelRunner(model, n_blocks=n_running * per_seq, enable_prefix_caching=False)
    engine = ServingEngine(Scheduler("continuous", runner.blocks, 2048, max(n_running, 128)),
                           ModelExecutor(runner), requests)
    records = [r for r in engine.run() if not r.prefills and r.running == n_running]
    schedule_s = sum(r.schedule_s for r in records)
    total_s = sum(r.duration_s for r in records)
    return {"scheduler_overhead_frac": schedule_s / total_s,
            "scheduler_overhead_iterations": len(records),
            "scheduler_s_per_iteration": schedule_s / len(records),
            "iteration_s_at_64": total_s / len(records)}


def cost_model_calibration(model: str = "smollm2-135m", requests: int = 32,
                           quick_roofs: bool = False) -> dict:
    """The roofline cost model on this device's measured roofs against the wall clock."""
    roofs = measure_roofs("cpu", quick=quick_roofs)
    lab_model, _ = load_lab_model(model)
    items = wl.generate(wl.Workload(
        requests, rate_per_s=8.0, prompt_len=wl.LengthDist.lognormal(4.5, 0.5),
        output_len=wl.LengthDist.lognormal(3.5, 0.5), seed=0))
    n_blocks = sum(-(-(w.prompt_tokens + w.output_tokens) // 16) for w in items)
    runner = ModelRunner(lab_model, n_blocks=n_blocks, enable_prefix_caching=False)
    cost = SimulatedExecutor(lab_model.config, (roofs.peak_flops["fp32"], roofs.bw_bytes_per_s),
                             dtype="fp32")
    budget = 512
    profiled = ProfiledCostModel.measure(lab_model, token_grid=tuple(
        n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if n <= budget))
    executor = PredictingExecutor(PredictingExecutor(ModelExecutor(runner), profiled), cost)
    ServingEngine(Scheduler("continuous", runner.blocks, budget, 128), executor,
                  requests_from_workload(items, lab_model.config.vocab_size)).run()
    errors = prediction_errors(executor.predictions)
    profiled_errors = prediction_errors(executor.executor.predictions)
    return {"cost_model_error_median": errors["all"]["median"],
            "cost_model_error_p90": errors["all"]["p90"],
            "cost_model_errors_by_kind": errors,
            "profiled_cost_model_error_median": profiled_errors["all"]["median"],
            "profiled_cost_model_error_p90": profiled_errors["all"]["p90"],
            "profiled_cost_model_errors_by_kind": profiled_errors,
            "cost_model_roofs": {"peak_flops_fp32": roofs.peak_flops["fp32"],
                                 "bandwidth_bytes_per_s": roofs.bw_bytes_per_s}}


def run_batching_bench(requests: int = BATCHING_DEFAULTS["requests"],
                       simulator_requests: int = 5000, real: bool = True) -> dict:
    settings = dict(BATCHING_DEFAULTS, requests=requests)
    continuous = policy_metrics(dict(settings, policy="continuous"))
    static = policy_metrics(dict(settings, policy="static"))
    sim = bench_simulator(simulator_requests, settings["model_config"], settings["hardware"])
    figures = {
        "requests": requests,
        "throughput_ratio": continuous.output_tokens_per_s / static.output_tokens_per_s,
        "continuous_output_tokens_per_s": continuous.output_tokens_per_s,
        "static_output_tokens_per_s": static.output_tokens_per_s,
        "continuous_ttft_p99_s": continuous.ttft_s.p99,
        "static_ttft_p99_s": static.ttft_s.p99,
        "continuous_tpot_p99_s": continuous.tpot_s.p99,
        "static_tpot_p99_s": static.tpot_s.p99,
        "simulated_requests_per_s_of_wall": sim["requests_per_wall_s"],
        "simulator_requests": simulator_requests,
        "simulator_wall_s": sim["wall_s"],
    }
    figures.update(scheduler_overhead())
    if real:
        figures.update(cost_model_calibration())
        concurrent = run_concurrent_bench()
        figures["concurrent_run"] = {k: v for k, v in concurrent.items()  # its set-up
                                     if k in ("model", "dtype", "requests", "output_tokens",
                                              "threads", "prompt_tokens_mean")}
        figures.update({k: v for k, v in concurrent.items() if k not in figures["concurrent_run"]})
    return figures
