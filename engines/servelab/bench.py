"""The batching lab's engine figures, in one run (`inferlab bench batching` adds the timeline's
render time, app/benches/batching.py):

    throughput_ratio                  continuous / static output tokens/s, the same seeded
                                      workload, simulated clock (Llama-3-8B on an H100)
    {continuous,static}_ttft_p99_s    p99 TTFT and TPOT of each policy
    {continuous,static}_tpot_p99_s
    simulated_requests_per_s_of_wall  requests the simulator gets through per wall second
                                      (engine.bench_simulator)
"""

from __future__ import annotations

from inferlab.engines.servelab.section import BATCHING_DEFAULTS, batching_session


def policy_metrics(settings: dict):
    session = batching_session(settings)
    while not session.done:
        session.step()
    return session.serving_metrics()


def run_batching_bench(requests: int = BATCHING_DEFAULTS["requests"],
                       simulator_requests: int = 2000) -> dict:
    from inferlab.engines.serve.engine import bench_simulator

    settings = dict(BATCHING_DEFAULTS, requests=requests)
    continuous = policy_metrics(dict(settings, policy="continuous"))
    static = policy_metrics(dict(settings, policy="static"))
    sim = bench_simulator(simulator_requests, settings["model_config"], settings["hardware"])
    return {
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
    }
