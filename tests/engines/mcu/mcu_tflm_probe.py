"""Ask TFLM itself (the tflite-micro wheel) how big its arena head is for each model.

Run as a script: `python mcu_tflm_probe.py MODEL.tflite ...` prints one JSON object,
path -> head bytes, read from `print_allocations()` (TFLM writes it to stderr, so fd 2 is
captured). Tests run it in a subprocess: the wheel is C++ and a failure there must not
take pytest down with it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ARENA_BYTES = 1024 * 1024


def head_bytes(path: str) -> int:
    from tflite_micro.python.tflite_micro import runtime

    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            interpreter = runtime.Interpreter.from_file(path, arena_size=ARENA_BYTES)
            interpreter.print_allocations()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode("utf-8", "replace")
    match = re.search(r"Arena allocation head (\d+) bytes", text)
    if match is None:
        raise RuntimeError(f"no head size in TFLM's report for {path}:\n{text}")
    return int(match.group(1))


def tflm_heads(paths: list[Path], timeout_s: float = 120) -> dict[str, int]:
    """Run this file in a subprocess on `paths`; path (as given) -> TFLM head bytes."""
    result = subprocess.run(
        [sys.executable, __file__, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if result.returncode != 0:
        raise RuntimeError(f"TFLM probe failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return json.loads(result.stdout)


if __name__ == "__main__":
    print(json.dumps({p: head_bytes(p) for p in sys.argv[1:]}))
