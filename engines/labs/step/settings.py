"""The step lab's settings: the model, the phase (prefill of `tokens`, or decode at `batch`
over `context` tokens), the executions compared, the profiled steps and the threads."""

from __future__ import annotations

from inferlab.engines.fields import Setting, check_settings

PHASES = ("decode", "prefill")
EXECUTIONS = ("eager", "compile", "native")
"""eager: torch ops (the reference); compile: torch.compile (inductor, its default mode) of the
eager model's forward; native: the native kernels, the decoder's layers in one call."""
MAX_BATCH = 256
MAX_TOKENS = 32_768
STEP_DEFAULTS = {"model": "tiny", "phase": "decode", "batch": 1, "context": 128, "tokens": 64,
                 "executions": ["eager", "native"], "repeats": 5, "threads": 0}
STEP_SETTINGS = {  # the view's ranges
    "model": Setting("str", max_len=4096),  # a registry name, a .gguf file or HF folder
    "phase": Setting("str", choices=PHASES),
    "batch": Setting("int", 1, MAX_BATCH),  # decode: sequences, one token each
    "context": Setting("int", 0, MAX_TOKENS),  # decode: tokens already in each one's cache
    "tokens": Setting("int", 1, MAX_TOKENS),  # prefill: the prompt's tokens
    "executions": Setting("str-list", choices=EXECUTIONS, max_len=len(EXECUTIONS)),
    "repeats": Setting("int", 1, 101),  # profiled steps; the median one is shown
    "threads": Setting("int", 0, 1024),  # torch's intra-op threads (0: as the process has)
}


def check_step_settings(settings, where: str = "settings") -> dict:
    """The defaults overlaid with `settings`, every field checked (ValueError names it)."""
    out = check_settings(settings, STEP_SETTINGS, STEP_DEFAULTS, where)
    if not out["executions"]:
        raise ValueError(f"{where}.executions: expected at least one of "
                         f"{', '.join(EXECUTIONS)}")
    if len(set(out["executions"])) != len(out["executions"]):
        raise ValueError(f"{where}.executions: {out['executions']} names one twice")
    return out
