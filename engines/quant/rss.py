"""Process memory of a low-bit model, measured: each variant loaded in a fresh Python process,
the fp32 source dropped, the resident set size (RSS) read after one decoded token.

    model_rss_bytes("smollm2-135m", bits=4) -> {"rss_bytes": ..., "weight_bytes": ...}

Arithmetic says INT4 weights are ~8x smaller than fp32; RSS says what the process really holds
(the interpreter, torch's own ~300 MB, the tokenizer, allocator slack). The difference of two
variants' RSS is the memory the weights really saved.
"""

from __future__ import annotations

import json
import subprocess
import sys

_CHILD = r"""
import ctypes, gc, json, sys
import psutil, torch
from inferlab.engines.model.generate import generate
from inferlab.engines.model.registry import load_model
from inferlab.engines.quant.lowbit_linear import lowbit_model
name, bits = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(1)
model, tok = load_model(name)
if bits:
    model = lowbit_model(model, bits=bits, group_size=128, lm_head_bits=8)
    gc.collect()
generate(model, [tok.encode_prompt("Hi")], max_new_tokens=1)
gc.collect()
try:  # hand freed heap pages back to the OS (glibc keeps them otherwise)
    ctypes.CDLL("libc.so.6").malloc_trim(0)
except (OSError, AttributeError):
    pass
print(json.dumps({"rss_bytes": psutil.Process().memory_info().rss,
                  "weight_bytes": model.weight_bytes}))
"""


def model_rss_bytes(model: str = "smollm2-135m", bits: int = 0, timeout_s: float = 300.0
                    ) -> dict:
    """RSS and weight bytes of `model` as fp32 (bits 0) or low-bit (8 or 4: INT8 lm_head)."""
    out = subprocess.run([sys.executable, "-c", _CHILD, model, str(bits)], capture_output=True,
                         text=True, timeout=timeout_s, check=False)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"measuring the RSS of {model} at {bits or 32} bits failed: {tail}")
    return json.loads(out.stdout.strip().splitlines()[-1])
