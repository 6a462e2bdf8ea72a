"""vLLM's CPU build as the batching bench's production peer, on the same requests.

vLLM is not a dependency of InferLab (it pins its own torch and transformers), so it runs in
a Python of its own, named by the environment variable INFERLAB_VLLM_PYTHON; without it the
bench reports the peer as not run. The peer process loads SmolLM2 from a Hugging Face folder
converted once from the shipped GGUF (transformers dequantizes it; cached under the user cache),
then answers one JSON line per request batch on stdin: every prompt as token ids, greedy,
exactly `output_tokens` each (EOS ignored), timed around `LLM.generate` only. It stays up
between batches so the bench can interleave it with our engine, repeat by repeat.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import filelock
import platformdirs

from inferlab.engines.model.bench import load_transformers_gguf

VLLM_PYTHON_ENV = "INFERLAB_VLLM_PYTHON"
START_TIMEOUT_S = 600.0
"""vLLM's CPU start-up (model load, KV-cache allocation, warm-up) takes 100-150 s here."""
REPLY_TIMEOUT_S = 600.0
"""A hang guard for one batch (32 requests x 64 tokens take ~7-10 s here)."""

_PEER_SCRIPT = r"""
import json, sys, time
if __name__ == "__main__":  # vLLM's engine core forks/spawns: guard the driver
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    cfg = json.loads(sys.argv[1])
    llm = LLM(model=cfg["model_dir"], dtype=cfg["dtype"], max_model_len=cfg["max_model_len"],
              max_num_seqs=cfg["max_num_seqs"], enable_prefix_caching=False, seed=0)
    print(json.dumps({"ready": True, "version": __import__("vllm").__version__}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        params = SamplingParams(temperature=0.0, max_tokens=req["output_tokens"],
                                min_tokens=req["output_tokens"], ignore_eos=True)
        prompts = [TokensPrompt(prompt_token_ids=ids) for ids in req["prompts"]]
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        wall_s = time.perf_counter() - t0
        print(json.dumps({"wall_s": wall_s,
                          "outputs": [list(o.outputs[0].token_ids) for o in outs]}), flush=True)
"""


def vllm_python() -> str | None:
    """The interpreter INFERLAB_VLLM_PYTHON names, or None when unset or empty."""
    return os.environ.get(VLLM_PYTHON_ENV) or None


def dtype_name(dtype) -> str:
    """A torch dtype as vLLM and the cache key name it ("float32", "bfloat16")."""
    return str(dtype).removeprefix("torch.")


def hf_folder(gguf_path: Path, dtype, cache_root: Path | None = None) -> Path:
    """A Hugging Face model folder of the GGUF at `gguf_path` (config, tokenizer and
    safetensors weights in `dtype`), converted by transformers once and cached by file name,
    size and dtype under `cache_root` (default: the user cache). Processes that ask at once
    (two windows, two test workers) convert it once: the others wait on its lock file."""
    stat = gguf_path.stat()
    key = f"{gguf_path.stem}-{stat.st_size}-{dtype_name(dtype)}"
    root = Path(cache_root) if cache_root is not None else Path(
        platformdirs.user_cache_dir("inferlab"))
    out = root / "hf" / key
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(out.with_name(out.name + ".lock")):
        if (out / "config.json").is_file():  # converted while this one waited
            return out
        # here, not at the top: the test extra's, and only for a first conversion
        import transformers

        tmp = out.with_name(out.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)  # a killed conversion's leftovers
        model = load_transformers_gguf(gguf_path, dtype)
        # transformers marks a GGUF-loaded model as quantized and refuses to save it, yet its
        # weights are already dequantized: drop the mark so plain safetensors are written
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        transformers.AutoTokenizer.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name).save_pretrained(tmp)
        tmp.rename(out)  # complete folders only: a killed conversion leaves just the .partial
    return out


class VllmPeer:
    """One vLLM process on `python`, serving `model_dir`: `generate(prompts, n)` returns
    (wall seconds, output ids per prompt). Use as a context manager; it is stopped on exit."""

    def __init__(self, python: str, model_dir: Path, dtype: str, threads: int,
                 max_model_len: int, max_num_seqs: int):
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="4",
                   VLLM_CPU_OMP_THREADS_BIND=f"0-{threads - 1}", OMP_NUM_THREADS=str(threads))
        cfg = {"model_dir": str(model_dir), "dtype": dtype, "max_model_len": max_model_len,
               "max_num_seqs": max_num_seqs}
        # its log goes to a file: a pipe nobody reads fills up and stalls vLLM mid-run
        self._log = tempfile.TemporaryFile("w+")
        self._proc = subprocess.Popen([python, "-c", _PEER_SCRIPT, json.dumps(cfg)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, text=True, env=env)
        # its replies are read on a thread so that a peer that stops answering is a timeout,
        # not a bench that hangs; "" marks the end of its output
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        try:
            ready = self._read_line(START_TIMEOUT_S)
        except RuntimeError:
            self._proc.kill()  # stalled or gone: nothing left to wait for
            self.close()
            raise
        self.version = ready.get("version")

    def _pump(self) -> None:
        for line in self._proc.stdout:
            if line.startswith("{"):  # vLLM may print to stdout too
                self._lines.put(line)
        self._lines.put("")

    def _read_line(self, timeout_s: float) -> dict:
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise RuntimeError(f"vLLM peer gave no answer in {timeout_s:g} s") from None
        if not line:
            self._proc.wait()
            self._log.seek(0)
            lines = self._log.read().strip().splitlines() or ["(no output)"]
            # the last line of its log is the error itself (a traceback ends with it)
            raise RuntimeError(f"vLLM peer exited (code {self._proc.poll()}): {lines[-1]}")
        return json.loads(line)

    def generate(self, prompts_ids: list[list[int]], output_tokens: int
                 ) -> tuple[float, list[list[int]]]:
        self._proc.stdin.write(json.dumps({"prompts": prompts_ids,
                                           "output_tokens": output_tokens}) + "\n")
        self._proc.stdin.flush()
        reply = self._read_line(REPLY_TIMEOUT_S)
        return reply["wall_s"], reply["outputs"]

    def close(self) -> None:
        if self._log.closed:
            return
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def __enter__(self) -> VllmPeer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
