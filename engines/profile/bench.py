"""trace_read_mb_per_s: how fast a torch.profiler trace is read as a stream (goal ≥ 50 MB/s).

The trace is generated: torch.profiler-shaped events (process and thread names, cpu_ops with
recorded shapes, their cudaLaunchKernel calls, the kernels on two streams, memcpys, flow
events), written to a temporary folder until it holds `target_bytes`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from inferlab.engines.profile.chrome_trace import read_chrome_trace

TARGET_BYTES = 200 * 10**6
OPS = ("aten::addmm", "aten::mm", "aten::add", "aten::mul", "aten::silu", "aten::softmax",
       "aten::layer_norm", "aten::copy_")


def _step_events(step: int, ts: float) -> list[dict]:
    """One op's worth of events: the op, its launch, its kernel, every other a memcpy."""
    name = OPS[step % len(OPS)]
    ext = step + 1
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 4242, "tid": 4242, "ts": ts,
         "dur": 12.345, "args": {"External id": ext, "Record function id": 0,
                                 "Concrete Inputs": ["", "", ""],
                                 "Input type": ["float", "float", "float"],
                                 "Input Strides": [[4096, 1], [4096, 1], [4096, 1]],
                                 "Input Dims": [[16, 4096], [4096, 4096], [16, 4096]],
                                 "Ev Idx": step, "flops": 536870912}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242,
         "tid": 4242, "ts": ts + 2.5, "dur": 4.75,
         "args": {"External id": ext, "cbid": 211, "correlation": ext}},
        {"ph": "X", "cat": "kernel", "name": f"void gemm_kernel_{step % 5}<float, 128, 4>()",
         "pid": 0, "tid": 7 + step % 2, "ts": ts + 8.0, "dur": 20.5,
         "args": {"External id": ext, "queued": 0, "device": 0, "context": 1,
                  "stream": 7 + step % 2, "correlation": ext, "registers per thread": 128,
                  "shared memory": 49152, "blocks per SM": 1.25, "warps per SM": 10.0,
                  "grid": [132, 1, 1], "block": [256, 1, 1],
                  "est. achieved occupancy %": 12}},
        {"ph": "f", "id": ext, "pid": 0, "tid": 7, "ts": ts + 8.0, "cat": "ac2g",
         "name": "ac2g", "bp": "e"},
    ]
    if step % 2:
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)",
                       "pid": 0, "tid": 7, "ts": ts + 30.0, "dur": 1.5,
                       "args": {"device": 0, "context": 1, "stream": 7, "correlation": ext,
                                "bytes": 65536, "memory bandwidth (GB/s)": 43.7}})
    return events


def write_trace(path: str, target_bytes: int = TARGET_BYTES) -> int:
    """A torch.profiler-shaped trace of about `target_bytes` at `path`; its event count."""
    meta = [
        {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4242,
         "args": {"name": "thread 4242 (python3)"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 8, "args": {"name": "stream 8"}},
    ]
    count = 0
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        written += f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n'
                           '  "traceEvents": [\n')
        first = True
        for event in meta:
            written += f.write(("" if first else ",\n") + json.dumps(event))
            first = False
            count += 1
        step = 0
        while written < target_bytes:
            block = ",\n".join(json.dumps(e) for e in _step_events(step, 1000.0 + 40.0 * step))
            written += f.write(",\n" + block)
            count += len(_step_events(step, 0.0))
            step += 1
        f.write('\n  ],\n  "traceName": "generated"\n}\n')
    return count


def trace_read_mb_per_s(target_bytes: int = TARGET_BYTES) -> float:
    """MB (10^6 bytes) per second of `read_chrome_trace` over a generated trace."""
    with tempfile.TemporaryDirectory(prefix="inferlab-trace-") as folder:
        path = os.path.join(folder, "trace.json")
        write_trace(path, target_bytes)
        size = os.path.getsize(path)
        start = time.perf_counter()
        read_chrome_trace(path)
        elapsed = time.perf_counter() - start
    return size / 1e6 / elapsed
