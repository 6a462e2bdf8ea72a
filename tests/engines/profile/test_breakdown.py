"""Hand-made traces whose idle, compute, memory and communication times are known exactly."""

from __future__ import annotations

import json

from inferlab.engines.profile.breakdown import breakdown, category, covered_us
from inferlab.engines.profile.chrome_trace import TraceEvent, read_chrome_trace
from inferlab.engines.profile.kernel_table import kernel_table


def x(name, ts, dur, cat="kernel", pid=0, tid=7, **args) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}


def write(tmp_path, events, name="trace.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return str(path)


def test_known_gaps_give_the_idle_time_exactly(tmp_path):
    # stream 7: [100, 130) gemm, gap 20, [150, 160) memcpy, gap 5, [165, 205) nccl, gap 15,
    # [220, 230) gemm: span 130 µs, busy 90, idle 40.
    # stream 8: two overlapping kernels [0, 50) and [30, 80), one nested [10, 20): busy 80.
    # The CPU side (a cpu_op, a launch) is not a stream once the trace has GPU work.
    path = write(tmp_path, [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        x("gemm", 100, 30), x("Memcpy HtoD (Pageable -> Device)", 150, 10, cat="gpu_memcpy"),
        x("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 165, 40), x("gemm", 220, 10),
        x("a", 0, 50, tid=8), x("b", 30, 50, tid=8), x("c", 10, 10, tid=8),
        x("aten::mm", 90, 200, cat="cpu_op", pid=1, tid=1),
        x("cudaLaunchKernel", 95, 3, cat="cuda_runtime", pid=1, tid=1),
    ])
    trace = read_chrome_trace(path)
    s7, s8 = breakdown(trace.events, trace.thread_names)
    assert (s7.pid, s7.tid, s7.name, s7.kind, s7.events) == (0, 7, "stream 7", "stream", 4)
    assert s7.span_s == 130e-6
    assert s7.idle_s == 40e-6
    assert s7.compute_s == 40e-6
    assert s7.memory_s == 10e-6
    assert s7.communication_s == 40e-6
    assert (s8.name, s8.span_s, s8.idle_s, s8.compute_s) == ("0/8", 80e-6, 0.0, 80e-6)

    rows = {r.name: r for r in kernel_table(trace.events)}
    assert set(rows) == {"gemm", "Memcpy HtoD (Pageable -> Device)",
                         "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "a", "b", "c"}
    assert (rows["gemm"].calls, rows["gemm"].total_s, rows["gemm"].mean_s) == (2, 40e-6, 20e-6)
    assert rows["gemm"].share == 40 / 200  # of every GPU event's summed time
    assert list(rows)[:4] == ["a", "b", "gemm", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    # most time first, a tie by name


def test_cpu_threads_when_there_is_no_gpu_work(tmp_path):
    # thread 1: aten::linear [0, 100) holding aten::addmm [10, 90), then gloo [150, 170):
    # busy 120 (nested once), idle 50. Thread 2: one op, no idle.
    path = write(tmp_path, [
        x("aten::linear", 0, 100, cat="cpu_op", pid=1, tid=1),
        x("aten::addmm", 10, 80, cat="cpu_op", pid=1, tid=1),
        x("gloo:all_reduce", 150, 20, cat="cpu_op", pid=1, tid=1),
        x("ProfilerStep#1", 0, 170, cat="user_annotation", pid=1, tid=1),
        x("aten::add", 5, 7, cat="cpu_op", pid=1, tid=2),
    ])
    trace = read_chrome_trace(path)
    t1, t2 = breakdown(trace.events)
    assert (t1.kind, t1.span_s, t1.idle_s, t1.compute_s) == ("thread", 170e-6, 50e-6, 100e-6)
    assert (t1.communication_s, t1.memory_s) == (20e-6, 0.0)
    assert (t2.span_s, t2.idle_s, t2.compute_s) == (7e-6, 0.0, 7e-6)
    assert {r.name for r in kernel_table(trace.events)} == {"aten::linear", "aten::addmm",
                                                           "gloo:all_reduce", "aten::add"}


def test_overlapping_categories_count_once_first_communication():
    # compute [0, 100) under a memcpy [20, 40) under an all_reduce [30, 60): each moment once.
    events = [TraceEvent("k", "kernel", 0.0, 100.0, 0, 7, {}),
              TraceEvent("Memcpy DtoD", "gpu_memcpy", 20.0, 20.0, 0, 7, {}),
              TraceEvent("all_reduce", "kernel", 30.0, 30.0, 0, 7, {})]
    (lane,) = breakdown(events)
    assert (lane.communication_s, lane.memory_s, lane.compute_s, lane.idle_s) == (
        30e-6, 10e-6, 60e-6, 0.0)


def test_categories_by_name_and_cat():
    def ev(name, cat="kernel"):
        return TraceEvent(name, cat, 0.0, 1.0, 0, 0, {})

    assert category(ev("ncclKernel_AllGather_RING_LL_Sum_int8_t")) == "communication"
    assert category(ev("c10d::allreduce_", "cpu_op")) == "communication"
    assert category(ev("Memset (Device)", "gpu_memset")) == "memory"
    assert category(ev("Memcpy DtoH (Device -> Pinned)")) == "memory"
    assert category(ev("aten::broadcast_tensors", "cpu_op")) == "compute"
    assert category(ev("sm90_xmma_gemm_f16f16_f16f32")) == "compute"


def test_interval_union():
    assert covered_us([]) == 0.0
    assert covered_us([(0, 10), (5, 7), (10, 12), (20, 21)]) == 13.0
