"""`AttentionSession`: one execution stepped tile by tile on seeded Q, K, V, for the window;
`run_executions`: all three run to the end and checked against SDPA, for the CLI."""

from __future__ import annotations

from inferlab.engines.attention.executions import make_engine, sdpa_reference
from inferlab.engines.attention.step import EXECUTIONS, NAIVE
from inferlab.engines.labs.attention.records import AttentionRunInfo
from inferlab.engines.labs.attention.settings import (
    ELEMENT_BYTES,
    MAX_NAIVE_BYTES,
    MAX_STEPS,
    tile_sizes,
)
from inferlab.engines.labs.attention.source import SEEDED, model_layer_qkv, seeded_qkv


def check_naive_fits(n: int, heads: int) -> None:
    need = 2 * heads * n * n * ELEMENT_BYTES
    if need > MAX_NAIVE_BYTES:
        raise ValueError(f"naive attention at N={n}, {heads} head(s) holds S and P: "
                         f"{need / 2**30:.1f} GiB, over the lab's {MAX_NAIVE_BYTES / 2**30:.0f} "
                         "GiB; choose a smaller N or the tiled execution")


class AttentionSession:
    """step() -> AttentionStep; `info` the run, `engine` the execution being stepped."""

    def __init__(self, settings: dict, device: str = "cpu") -> None:
        n, d, heads = int(settings["n"]), int(settings["d"]), int(settings["heads"])
        execution, causal = settings["execution"], bool(settings["causal"])
        source = settings.get("source", SEEDED)
        if source == SEEDED:
            self.q, self.k, self.v = seeded_qkv(n, d, heads, settings["seed"])
            what = f"seeded normal Q, K, V (seed {settings['seed']})"
        else:
            self.q, self.k, self.v, what = model_layer_qkv(source, int(settings["layer"]), n,
                                                           heads, device)
            heads, n, d = self.q.shape
        if execution == NAIVE:
            check_naive_fits(n, heads)
        br, bc = tile_sizes(settings, d)
        self.engine = make_engine(execution, self.q, self.k, self.v, br, bc, causal)
        if self.engine.steps_total > MAX_STEPS:
            raise ValueError(f"{execution} attention at N={n} in tiles of Br={br}, Bc={bc} "
                             f"is {self.engine.steps_total:,} steps, over the lab's "
                             f"{MAX_STEPS:,}; choose larger tiles or a smaller N")
        self.info = AttentionRunInfo.of(n, d, heads, causal, br, bc, ELEMENT_BYTES, execution,
                                        int(settings["on_chip_kib"]) * 1024, what)

    @property
    def done(self) -> bool:
        return self.engine.done

    @property
    def step_index(self) -> int:
        return self.engine.step_index

    def step(self):
        return self.engine.step()

    def max_abs_error_vs_sdpa(self) -> float:
        e = self.engine
        ref = sdpa_reference(e.execution, self.q, self.k, self.v, e.causal)
        return float((e.output - ref).abs().max())


def run_executions(settings: dict, executions=EXECUTIONS, on_step=None,
                   device: str = "cpu") -> dict:
    """Each execution run to its end on the same Q, K, V: execution -> its counted totals,
    steps, peak working set and error against torch SDPA, beside the closed form."""
    out = {}
    for execution in executions:
        session = AttentionSession(dict(settings, execution=execution), device)
        while not session.done:
            record = session.step()
            if on_step is not None:
                on_step(record)
        e, form = session.engine, session.info.closed_forms[execution]
        out[execution] = {
            "bytes_read": e.bytes_read, "bytes_written": e.bytes_written, "steps": e.steps_total,
            "flops": e.flops, "peak_on_chip_bytes": e.peak_on_chip_bytes,
            "max_abs_error_vs_sdpa": session.max_abs_error_vs_sdpa(),
            "closed_form_bytes_read": form.bytes_read,
            "closed_form_bytes_written": form.bytes_written,
            "arithmetic_intensity_flop_per_byte": form.intensity,
        }
    return out
