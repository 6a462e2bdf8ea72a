"""The attention lab's snapshot section: settings, the run (AttentionRunInfo) and its steps.

Every step keeps its counters; only the last `STEPS_WITH_ARRAYS` keep their score tile and
m, ℓ rows, so that a run of thousands of tiles stays a small file."""

from __future__ import annotations

from inferlab.engines.fields import (
    Setting,
    check_settings,
    read_fields,
    read_list,
    read_object,
    read_tuple,
)
from inferlab.engines.labs.attention.records import (
    AttentionRunInfo,
    AttentionSnapshot,
    step_from_dict,
    step_to_dict,
)
from inferlab.engines.labs.attention.settings import (
    ATTENTION_DEFAULTS,
    ATTENTION_SETTINGS,
    MAX_STEPS,
)
from inferlab.engines.trace.snapshot import lab_section, section_field

STEPS_WITH_ARRAYS = 64


def attention_metrics(info: AttentionRunInfo | None, records) -> dict:
    """The stepped execution's totals so far beside its closed form."""
    if info is None or not records:
        return {"steps": 0}
    last = records[-1]
    form = info.closed_forms[info.execution]
    return {"execution": info.execution, "steps": len(records),
            "steps_total": last.steps_total, "bytes_read": last.bytes_read,
            "bytes_written": last.bytes_written, "flops": last.flops,
            "closed_form_bytes_read": form.bytes_read,
            "closed_form_bytes_written": form.bytes_written,
            "peak_on_chip_bytes": max(r.on_chip_bytes for r in records)}


def attention_section(settings: dict, info: AttentionRunInfo | None, records,
                      timings: list[dict] = (), roofs=()) -> dict:
    """`timings`: rows of `bench.timings` the lab measured (none: not measured); `roofs`:
    the (label, peak FLOP/s, bandwidth bytes/s, measured) the run was placed on."""
    if info is None:
        return lab_section(settings, {}, {"steps": 0})
    keep_from = len(records) - STEPS_WITH_ARRAYS
    steps = [step_to_dict(r, with_arrays=i >= keep_from) for i, r in enumerate(records)]
    return lab_section(settings, {"run": info.to_dict(), "steps": steps,
                                  "timings": list(timings),
                                  "roofs": [list(r) for r in roofs]},
                       attention_metrics(info, records))


SECONDS = Setting("float", 0, 1e6, none=True)
TIMING_FIELDS = {"n": Setting("int", 1, 1 << 20), "naive_sp_bytes": Setting("int", 0, 2**62)}
TIMING_SERIES = (("naive_s", "naive torch (S, P materialised)"), ("sdpa_s", "torch SDPA"),
                 ("tiled_torch_s", "tiled, one-shot torch loop"),
                 ("tiled_native_s", "tiled, native C"),
                 ("sdpa_flash_bf16_s", "SDPA flash backend (bf16, CUDA)"),
                 ("triton_flash_bf16_s", "tiled, Triton (bf16, CUDA)"))
"""The timed kernels: a timing row's seconds per call and what was timed."""
TIMING_OPTIONAL = {**{key: None for key, _name in TIMING_SERIES}, "naive_error": None}


def _timing_row(value, where: str) -> dict:
    row = read_fields(value, TIMING_FIELDS, where)
    for key in TIMING_OPTIONAL:
        if key in value:
            reader = Setting("str", max_len=200, none=True) if key == "naive_error" else SECONDS
            row[key] = reader(value[key], f"{where}.{key}")
    return row


def read_attention_section(sec: dict) -> AttentionSnapshot:
    """The section as an `AttentionSnapshot`; ValueError names a bad field."""
    where = "labs.attention"
    read_object(sec, where)
    settings = check_settings(section_field(sec, "settings", where), ATTENTION_SETTINGS,
                              ATTENTION_DEFAULTS, f"{where}.settings")
    state = read_object(section_field(sec, "state", where), f"{where}.state")
    if not state:
        return AttentionSnapshot(settings, None, (), (), ())
    info = AttentionRunInfo.from_dict(section_field(state, "run", f"{where}.state"),
                                      f"{where}.state.run")
    records = read_list(section_field(state, "steps", f"{where}.state"), step_from_dict,
                        f"{where}.state.steps", MAX_STEPS)
    for i, r in enumerate(records):
        at = f"{where}.state.steps[{i}]"
        if r.execution != info.execution:
            raise ValueError(f"{at}.execution: expected {info.execution}, got {r.execution}")
        for name in ("q_rows", "k_rows"):
            rows = getattr(r, name)
            if rows is not None and rows[1] > info.n:
                raise ValueError(f"{at}.{name}: expected rows within N = {info.n}, got "
                                 f"{list(rows)}")
        if r.head >= info.heads:
            raise ValueError(f"{at}.head: expected below {info.heads}, got {r.head}")
    timings = read_list(state.get("timings", []), _timing_row, f"{where}.state.timings", 64)
    roofs = tuple(read_list(state.get("roofs", []), _roof, f"{where}.state.roofs", 8))
    return AttentionSnapshot(settings, info, tuple(records), tuple(timings), roofs)


def _roof(value, where: str) -> tuple:
    rate = Setting("float", 1e-300, 1e30)  # FLOP/s and bytes/s: positive and finite
    return read_tuple(value, (Setting("str", max_len=200), rate, rate, Setting("bool")), where,
                      "[label, peak FLOP/s, bandwidth bytes/s, measured]")
