"""A real OpenAI-compatible server on this machine: llama-cpp-python's (`python -m
llama_cpp.server`, the `test` extra) on a GGUF, on 127.0.0.1 and a free port, for the
fidelity run (fidelity.py); tests/engines/endpoint/test_llama_cpp_server.py starts it alike.

    with llama_cpp_server(path) as server: ...  # server.url; stopped (killed) on leaving

What it is, measured here: ONE completion at a time (a lock), one token per chunk, no
/metrics, `min_tokens` but not `ignore_eos`. Started with `--interrupt_requests False` (by
default a waiting request cuts the streaming one off) and `--n_batch 1` (llama.cpp 0.3.36's
batched prompt path dies of a segmentation fault on an AMX Xeon; one token a batch runs
everywhere, and a prompt then costs about one decode step per token).
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

START_TIMEOUT_S = 60.0


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python is installed (its server is then importable)."""
    return importlib.util.find_spec("llama_cpp") is not None


@dataclass(frozen=True)
class LlamaServer:
    """A started server: its URL and its process (for the CPU time it got)."""

    url: str
    process: psutil.Process

    def cpu_s(self) -> float:
        """The server's CPU seconds so far, user + system, its threads together."""
        t = self.process.cpu_times()
        return t.user + t.system


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def llama_cpp_server(model_path: str | Path, n_ctx: int = 2048, n_batch: int = 1,
                     start_timeout_s: float = START_TIMEOUT_S) -> Iterator[LlamaServer]:
    """The server once it answers /v1/models; RuntimeError with the end of its log when it
    exits or does not answer within start_timeout_s."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="inferlab-llama-") as folder:
        log_path = Path(folder) / "server.log"
        # the log goes to a file: a pipe nobody reads would fill and stall the server
        with log_path.open("w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path),
                 "--host", "127.0.0.1", "--port", str(port), "--interrupt_requests", "False",
                 "--n_ctx", str(n_ctx), "--n_batch", str(n_batch), "--verbose", "False"],
                stdout=subprocess.DEVNULL, stderr=log)
            try:
                url = f"http://127.0.0.1:{port}"
                _wait_ready(proc, url, log_path, start_timeout_s)
                yield LlamaServer(url, psutil.Process(proc.pid))
            finally:
                proc.kill()
                proc.wait(10)


def _wait_ready(proc: subprocess.Popen, url: str, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError("the llama.cpp server exited: "
                               + log_path.read_text(errors="replace")[-2000:])
        try:
            if httpx.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the llama.cpp server did not answer /v1/models within "
                               f"{timeout_s:g} s")
        time.sleep(0.2)
