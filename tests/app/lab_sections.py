"""A small real snapshot section of every lab, made by the lab's own engines (the tiny model,
the simulated clock, the fake server, TFLM's hello-world model), as plain JSON: what the
snapshot fuzz mutates. Each builder returns `labs.<id>` as `json.loads(json.dumps(...))`
gives it back from a file."""

from __future__ import annotations

import json

import numpy as np

from inferlab.engines.trace.jsonable import to_jsonable


def _plain(section: dict) -> dict:
    return json.loads(json.dumps(to_jsonable(section), allow_nan=False))


def hardware() -> dict:
    from inferlab.engines.hardware.discovery import discover_devices
    from inferlab.engines.hardware.microbench import MeasuredRoofs
    from inferlab.engines.hardware.telemetry_history import GpuSeries, TelemetryHistory
    from inferlab.engines.labs.hardware.section import hardware_section
    from inferlab.engines.labs.hardware.settings import HARDWARE_DEFAULTS

    t = np.arange(4, dtype=float) * 0.5
    gpu = GpuSeries("cuda:0", np.array([10.0, 50.0, np.nan, 90.0]), np.full(4, 2.0**30),
                    np.full(4, 2.0**34), np.array([60.0, 120.0, 180.0, np.nan]),
                    np.full(4, 1500.0))
    history = TelemetryHistory(t, np.array([[5.0, 10.0]] * 4), np.full(4, 2.0**32), 2**34,
                               (gpu,))
    roofs = MeasuredRoofs("cpu", {"fp32": 1e11, "bf16": 5e10}, 2e10, 256, 2**24, 3)
    return _plain(hardware_section(dict(HARDWARE_DEFAULTS, device="cpu"), discover_devices(),
                                   history, {"cpu": roofs}))


def roofline() -> dict:
    from inferlab.engines.hardware.microbench import MeasuredPoint, MeasuredRoofs
    from inferlab.engines.labs.roofline.section import roofline_section
    from inferlab.engines.labs.roofline.settings import ROOFLINE_DEFAULTS
    from inferlab.engines.model.config import load_model_preset

    roofs = MeasuredRoofs("cpu", {"fp32": 1e11, "bf16": 5e10}, 2e10, 256, 2**24, 3)
    points = [MeasuredPoint("matmul 256", 2 * 256**3, 3 * 4 * 256**2, 1e-3),
              MeasuredPoint("decode gemv", 2 * 256**2, 4 * 256**2, 1e-4)]
    settings = dict(ROOFLINE_DEFAULTS, presets=["h100-sxm"])
    return _plain(roofline_section(settings, roofs, points,
                                   load_model_preset(settings["model"])))


def memory() -> dict:
    from inferlab.engines.hardware.presets import load_hardware_preset
    from inferlab.engines.labs.memory.section import memory_section
    from inferlab.engines.labs.memory.session import memory_plans, preset_target
    from inferlab.engines.labs.memory.settings import MEMORY_DEFAULTS
    from inferlab.engines.model.config import load_model_preset

    settings = dict(MEMORY_DEFAULTS)
    cfg = load_model_preset(settings["model"])
    target = preset_target(load_hardware_preset(settings["target"]))
    plan, _variants = memory_plans(settings, cfg, target)
    return _plain(memory_section(settings, cfg, plan, target))


def mcu() -> dict:
    import argparse

    from inferlab.engines.labs.mcu.run import add_arguments, run
    from inferlab.engines.mcu.examples import examples_dir
    from inferlab.engines.trace.recorder import TraceRecorder

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--model", str(examples_dir() / "hello_world_int8.tflite"),
                              "--compare", "linear"])
    section, _summary = run(args, TraceRecorder())
    return _plain(section)


def kv() -> dict:
    from inferlab.engines.labs.kv.section import kv_section
    from inferlab.engines.labs.kv.session import kv_run
    from inferlab.engines.labs.kv.settings import KV_DEFAULTS

    # multi-turn with the radix cache: the steps carry the prefix tree too (a turn hits at 16)
    settings = dict(KV_DEFAULTS, model="tiny", scenario="multi-turn", prefix_cache="radix")
    session, records = kv_run(settings, max_steps=18)
    return _plain(kv_section(settings, session.info, session.seq_infos(), records))


def batching() -> dict:
    from inferlab.engines.labs.batching.compare import compare_policies, rate_sweep
    from inferlab.engines.labs.batching.compare_records import comparison_state
    from inferlab.engines.labs.batching.section import batching_section
    from inferlab.engines.labs.batching.session import batching_session
    from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS

    settings = dict(BATCHING_DEFAULTS, requests=6, rate_per_s=40.0, prompt_mean=4.0,
                    output_mean=2.0)
    session = batching_session(settings)
    while not session.done:
        session.step()
    extras = comparison_state(compare_policies(settings), rate_sweep(settings, [20.0, 80.0]))
    return _plain(batching_section(session.settings, session.request_infos(), session.records,
                                   session.serving_metrics(), extras))


def speculative() -> dict:
    from inferlab.engines.labs.speculative.section import speculative_section
    from inferlab.engines.labs.speculative.session import speculative_session
    from inferlab.engines.labs.speculative.settings import speculative_defaults
    from inferlab.engines.labs.speculative.sweep_records import KPoint, KSweep

    session = speculative_session(speculative_defaults() | {"model": "tiny", "max_tokens": 10,
                                                             "k": 3})
    while not session.done:
        session.step()
    point = KPoint("ngram", 3, 0.5, 1.5, 0.5, 1.9, 1.875, 6, 0.1, 1.6, 1.4, 0.2, 0.15, 0.01,
                   0.02, True)
    sweep = KSweep("tiny", "ngram", 10, (point, KPoint(**dict(point.to_dict(), k=5))))
    return _plain(speculative_section(session.settings, session.header(), session.records,
                                      sweep))


def quant() -> dict:
    from inferlab.engines.labs.quant.section import quant_section
    from inferlab.engines.labs.quant.session import QuantSession
    from inferlab.engines.labs.quant.settings import QUANT_DEFAULTS

    session = QuantSession.open("tiny", eval_text="A clock counts the swings of a pendulum. " * 2)
    runs = [session.run(name, decode_tokens=None) for name in ("fp32", "int8", "kv-fp8")]
    layer = session.analyse(1, "qkv", "q4_0")
    settings = dict(QUANT_DEFAULTS, model="tiny", schemes=["fp32", "int8", "kv-fp8"])
    return _plain(quant_section(settings, session.model_name, session.eval_tokens, layer,
                                runs))


def endpoint() -> dict:
    from inferlab.engines.endpoint.fake_server import FakeServer
    from inferlab.engines.endpoint.load import EndpointRun, EndpointSettings
    from inferlab.engines.endpoint.sweep import EndpointSweep, EndpointSweepPoint
    from inferlab.engines.labs.endpoint.records import EndpointRecord
    from inferlab.engines.labs.endpoint.section import endpoint_section
    from inferlab.engines.labs.endpoint.settings import ENDPOINT_DEFAULTS
    from inferlab.engines.serve.metrics import SLO
    from inferlab.engines.serve.workload import WorkloadRequest

    work = [WorkloadRequest(arrival_s=0.0, prompt_tokens=16, output_tokens=5, prompt="")
            for _ in range(3)]
    work.append(WorkloadRequest(arrival_s=0.0, prompt_tokens=16, output_tokens=5,
                                prompt="[fake:http500]"))
    with FakeServer(token_interval_s=0.002, metrics=True) as server:
        settings = EndpointSettings(url=server.url, concurrency=2, scrape_hz=4,
                                    read_timeout_s=1.0, request_timeout_s=10.0,
                                    max_duration_s=20.0)
        record = EndpointRecord.of(EndpointRun(settings, work, slo=SLO(ttft_s=1.0)).run())
    points = (EndpointSweepPoint("synchronous", 2.0, 2.0, 50.0, 0.01, 0.02, 0.005, 0.006, 8,
                                 0, 2.0),
              EndpointSweepPoint("throughput", 9.0, 9.0, 200.0, 0.05, 0.2, 0.01, 0.02, 8, 0,
                                 9.0))
    sweep = EndpointSweep(points, points[0], SLO(ttft_s=0.5, tpot_s=0.05))
    side = {"columns": {"endpoint": {"title": "Endpoint", "metrics": record.metrics}},
            "notes": ["a note"]}
    return _plain(endpoint_section(dict(ENDPOINT_DEFAULTS), record, sweep, side))


def cluster() -> dict:
    """A 2P:2D run of 12 requests, with a replicas search of 2 GPUs beside it."""
    from inferlab.engines.cluster.cluster import run_cluster
    from inferlab.engines.cluster.search import search_layouts
    from inferlab.engines.labs.cluster.records import search_summary
    from inferlab.engines.labs.cluster.section import cluster_section
    from inferlab.engines.labs.cluster.settings import (
        CLUSTER_DEFAULTS,
        cluster_config,
        cluster_requests,
        cluster_slo,
    )

    settings = dict(CLUSTER_DEFAULTS, gpus=4, requests=12)
    config = cluster_config(settings)
    requests = cluster_requests(settings, config.model.vocab_size)
    search = search_layouts(config, "replicas", 2, requests, cluster_slo(settings))
    return _plain(cluster_section(settings, run_cluster(config, requests),
                                  search_summary(search)))


def moe() -> dict:
    """The tiny MoE at batch 4, two decode steps, a sweep over 1 and 4, a made-up roof."""
    from inferlab.engines.labs.moe.records import MeasuredRoof
    from inferlab.engines.labs.moe.section import moe_section
    from inferlab.engines.labs.moe.session import moe_model, moe_run
    from inferlab.engines.labs.moe.settings import check_moe_settings

    settings = check_moe_settings({"batch": 4, "prompts": 4, "steps": 2, "sweep": [1, 4]})
    model, _tok = moe_model(settings["model"], kernels=settings["kernels"])
    info, steps, sweep = moe_run(settings)
    return _plain(moe_section(settings, model.config, info, steps, sweep,
                              MeasuredRoof("cpu", 1e11, 2e10)))


def step() -> dict:
    """The tiny model's decode step at batch 2 over 8 tokens, eager and native, one repeat;
    a trace of one mm and relu on a made-up roof in the Trace tab."""
    import tempfile
    from pathlib import Path

    import torch
    from torch.profiler import ProfilerActivity, profile

    from inferlab.engines.labs.step.section import step_section
    from inferlab.engines.labs.step.session import step_run
    from inferlab.engines.labs.step.settings import check_step_settings
    from inferlab.engines.profile.op_roofline import Roof
    from inferlab.engines.profile.trace_profile import profile_trace

    settings = check_step_settings({"model": "tiny", "batch": 2, "context": 8, "repeats": 1,
                                    "threads": 1, "executions": ["eager", "native"]})
    info, executions = step_run(settings)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.mm(torch.randn(4, 32), torch.randn(32, 16)).relu()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        trace = profile_trace(path, Roof("made up", {"fp32": 1e11}, 2e10))
    return _plain(step_section(settings, info, executions, trace))


def attention() -> dict:
    from tests.app.test_attention_lab import attention_section_sample

    return attention_section_sample()


BUILDERS = {"hardware": hardware, "roofline": roofline, "memory": memory, "mcu": mcu, "kv": kv,
            "batching": batching, "cluster": cluster, "speculative": speculative,
            "quant": quant, "attention": attention, "endpoint": endpoint, "moe": moe,
            "step": step}
"""Lab id -> builder, one per lab of the registry."""
