"""The MoE lab's records and their JSON form.

`MoERunInfo` is what a run decodes (the model, its experts, the weight bytes it holds);
`MoEStepRecord` is one decode step's routing, experts touched, bytes read and times (the heat
map's data: `expert_counts[layer][expert]`); `BatchPoint` is one batch of the B sweep (means
over its steps); `MoESnapshot` is a snapshot section as read (section.py). Every record checks
its own fields when built (`check_fields`), so a section's reader names the bad field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

from inferlab.engines.fields import (
    Setting,
    as_tuple,
    check_fields,
    or_none,
    read_dataclass,
    read_list,
)
from inferlab.engines.model.config import ModelConfig

COUNT = Setting("int", 0, 2**62)
POSITIVE = Setting("int", 1, 2**62)
NUMBER = Setting("float", 0)
SECONDS = Setting("float", 0, 1e6)
MAX_LAYERS = 1024
MAX_EXPERTS = 4096
HIST_BINS = 10
"""Bins of the top-k weight histogram over [0, 1]."""

COUNTS = as_tuple(Setting("int-list", 0, 2**62, max_len=MAX_EXPERTS))
NUMBERS = as_tuple(Setting("float-list", 0, max_len=MAX_EXPERTS))


def _rows(read):
    """A reader of a list of rows (one per MoE layer), each read by `read`, as a tuple."""
    return lambda v, w: tuple(read_list(v, read, w, MAX_LAYERS))


@dataclass(frozen=True)
class MoERunInfo:
    """The model a run decodes: its MoE layers (indices), E experts with top-k routed per
    token, and the weight bytes it holds as loaded (`held_bytes`: a GGUF's codes as stored).
    `dense_bytes`: every weight but the routed experts (attention, norms, embeddings, router,
    shared experts); `expert_bytes[i]`: one routed expert of MoE layer i."""

    model: str
    model_name: str
    family: str
    kernel_path: str
    weight_format: str  # the weights' dtype ("fp32", "bf16"), or "gguf" (a file's codes)
    n_layers: int
    moe_layers: tuple[int, ...]
    n_experts: int
    top_k: int
    params_total: int
    params_active: int
    weight_bytes_total: int
    dense_bytes: int
    expert_bytes: tuple[int, ...]

    def __post_init__(self):
        check_fields(self, {"moe_layers": as_tuple(Setting("int-list", 0, MAX_LAYERS,
                                                           max_len=MAX_LAYERS)),
                            "expert_bytes": COUNTS})
        if len(self.expert_bytes) != len(self.moe_layers):
            raise ValueError(f"expert_bytes: {len(self.expert_bytes)} values for "
                             f"{len(self.moe_layers)} MoE layers")
        if not 1 <= self.top_k <= self.n_experts:
            raise ValueError(f"top_k: {self.top_k} of {self.n_experts} experts")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, value, where: str) -> MoERunInfo:
        return read_dataclass(cls, value, where, {
            "n_layers": Setting("int", 1, MAX_LAYERS), "n_experts": Setting("int", 1, MAX_EXPERTS),
            "top_k": Setting("int", 1, MAX_EXPERTS), "params_total": COUNT,
            "params_active": COUNT, "weight_bytes_total": COUNT, "dense_bytes": COUNT,
            "moe_layers": lambda v, w: v, "expert_bytes": lambda v, w: v})


@dataclass(frozen=True)
class MoEStepRecord:
    """One decode step of `batch` tokens (one per sequence), per MoE layer i:
    `expert_counts[i][e]` tokens routed to expert e (Σ_e = batch × k), `topk_weight_mean[i][r]`
    the mean router weight of rank r, `imbalance_max_over_mean[i]` = max_e / mean_e of the
    counts (≥ 1), `distinct_experts[i]` experts with a token (≤ min(E, batch × k)).
    `distinct_experts_formula` = E·(1 − (1 − k/E)^batch) (uniform routing). Weight bytes read
    by the step: dense part + Σ_i distinct × expert bytes (`weight_bytes_per_step`), and the
    same with the formula's distinct count. `topk_weight_hist`: every layer's top-k weights in
    HIST_BINS bins over [0, 1]. Times: the model's decode forward (`step_s`), and over the MoE
    layers the grouped expert product and the per-token loop on the step's own hidden states
    (`grouped_s`, `per_token_s`), whose outputs differ by at most `grouped_max_abs_diff`."""

    step: int
    batch: int
    expert_counts: tuple[tuple[int, ...], ...]
    topk_weight_mean: tuple[tuple[float, ...], ...]
    topk_weight_hist: tuple[int, ...]
    imbalance_max_over_mean: tuple[float, ...]
    distinct_experts: tuple[int, ...]
    distinct_experts_formula: float
    weight_bytes_per_step: int
    weight_bytes_per_step_formula: float
    step_s: float
    grouped_s: float
    per_token_s: float
    grouped_max_abs_diff: float

    def __post_init__(self):
        check_fields(self, {"expert_counts": _rows(COUNTS), "topk_weight_mean": _rows(NUMBERS),
                            "topk_weight_hist": as_tuple(Setting("int-list", 0, 2**62,
                                                                 max_len=HIST_BINS)),
                            "imbalance_max_over_mean": NUMBERS, "distinct_experts": COUNTS})
        layers = len(self.expert_counts)
        for name in ("topk_weight_mean", "imbalance_max_over_mean", "distinct_experts"):
            if len(getattr(self, name)) != layers:
                raise ValueError(f"{name}: {len(getattr(self, name))} values for {layers} MoE "
                                 "layers")
        if len(self.topk_weight_hist) != HIST_BINS:
            raise ValueError(f"topk_weight_hist: {len(self.topk_weight_hist)} bins, expected "
                             f"{HIST_BINS}")

    @classmethod
    def from_dict(cls, value, where: str) -> MoEStepRecord:
        raw = lambda v, w: v  # noqa: E731 (the record's own check reads it)
        return read_dataclass(cls, value, where, {
            "step": COUNT, "batch": POSITIVE, "distinct_experts_formula": NUMBER,
            "weight_bytes_per_step": COUNT, "weight_bytes_per_step_formula": NUMBER,
            "step_s": SECONDS, "grouped_s": SECONDS, "per_token_s": SECONDS,
            "grouped_max_abs_diff": NUMBER, "expert_counts": raw, "topk_weight_mean": raw,
            "topk_weight_hist": raw, "imbalance_max_over_mean": raw, "distinct_experts": raw})


@dataclass(frozen=True)
class BatchPoint:
    """One batch of the B sweep, means over its decode steps (and MoE layers): distinct
    experts measured and by the formula, weight bytes per step measured and by the formula,
    the step's median time and tokens per second, the grouped and per-token MoE times."""

    batch: int
    steps: int
    distinct_experts: float
    distinct_experts_formula: float
    weight_bytes_per_step: float
    weight_bytes_per_step_formula: float
    step_s: float
    tokens_per_s: float
    grouped_s: float
    per_token_s: float

    @classmethod
    def from_dict(cls, value, where: str) -> BatchPoint:
        return read_dataclass(cls, value, where, {
            "batch": POSITIVE, "steps": POSITIVE, "distinct_experts": NUMBER,
            "distinct_experts_formula": NUMBER, "weight_bytes_per_step": NUMBER,
            "weight_bytes_per_step_formula": NUMBER, "step_s": SECONDS, "tokens_per_s": NUMBER,
            "grouped_s": SECONDS, "per_token_s": SECONDS})


@dataclass(frozen=True)
class MeasuredRoof:
    """The roof the intensity is placed under on this machine: peak fp32 matmul FLOP/s and
    copy bandwidth as measured (engines/hardware/microbench)."""

    device: str
    peak_flops: float
    bw_bytes_per_s: float

    @classmethod
    def from_dict(cls, value, where: str) -> MeasuredRoof:
        return read_dataclass(cls, value, where, {
            "device": Setting("str", max_len=200), "peak_flops": Setting("float", 1e-300),
            "bw_bytes_per_s": Setting("float", 1e-300)})


read_step = MoEStepRecord.from_dict
read_point = BatchPoint.from_dict
read_roof = or_none(MeasuredRoof.from_dict)
read_steps = partial(read_list, item=read_step, max_len=1_000_000)


@dataclass(frozen=True)
class MoESnapshot:
    """A snapshot's `labs.moe` as read: the settings as checked, the model's description, the
    run (None before one), its decode steps at the settings' batch, the B sweep and the
    measured roof (None when not measured)."""

    settings: dict
    model_config: ModelConfig | None
    info: MoERunInfo | None
    steps: tuple[MoEStepRecord, ...]
    sweep: tuple[BatchPoint, ...]
    roof: MeasuredRoof | None
