"""The memory lab's formulas with a snapshot's numbers (what its Results table shows): one
GPU's KV and weights, what fits, the decode bound. The numbers are the lab's own plan
(memory_plans: engines/roofline/memory.py and parallel.py, where the formulas live).
"""

from __future__ import annotations

from inferlab.engines.dtypes import bytes_per_element
from inferlab.engines.labs.memory.records import MemorySnapshot
from inferlab.engines.labs.memory.session import memory_plans
from inferlab.engines.roofline.memory import experts_touched
from inferlab.engines.roofline.parallel import gpu_share
from inferlab.engines.roofline.units import format_bandwidth, format_bytes


def memory_formulas(snapshot: MemorySnapshot) -> list[tuple[str, str]]:
    """`snapshot`: what read_memory_section returns. (formula, substituted) pairs, one GPU's
    of a t × p group."""
    cfg = snapshot.model_config
    plan, _variants = memory_plans(snapshot.settings, cfg, snapshot.target)
    share = gpu_share(cfg, plan.tp, plan.pp, plan.weight_dtype, plan.kv_dtype)
    split = f" ÷ (t × p = {plan.tp * plan.pp})" if plan.tp * plan.pp > 1 else ""
    b = bytes_per_element(plan.kv_dtype)
    if cfg.is_mla:
        kv_token = ("KV per token = layers × (kv_lora_rank + qk_rope_head_dim) × bytes(kv_dtype) "
                    "(MLA: the latent, whole on every GPU)",
                    f"{share.layers} × ({cfg.kv_lora_rank} + {cfg.qk_rope_head_dim}) × {b:g} B = "
                    f"{_bytes(plan.kv_bytes_per_token)}")
    else:
        kv_token = ("KV per token = 2 × layers × KV heads × d_head × bytes(kv_dtype)",
                    f"2 × {share.layers} × {share.kv_heads} × {cfg.d_head} × {b:g} B = "
                    f"{_bytes(plan.kv_bytes_per_token)}")
    windowed = any(g.window for g in share.kv_layers)
    if windowed:
        held = " + ".join(f"{g.n_layers} × {g.bytes_per_token:,} B × "
                          + (f"min({plan.context:,}, {g.window:,})" if g.window
                             else f"{plan.context:,}") for g in share.kv_layers)
        kv_rows = [("KV per request = Σ layers KV per token per layer × min(context, window)",
                    f"{held} = {_bytes(plan.kv_bytes_per_request)}"),
                   ("KV for the batch = KV per request × batch",
                    f"{plan.kv_bytes_per_request:,} B × {plan.batch:,} = "
                    f"{_bytes(plan.kv_bytes_total)}")]
    else:
        kv_rows = [("KV for the batch = KV per token × context × batch",
                    f"{plan.kv_bytes_per_token:,} B × {plan.context:,} × {plan.batch:,} = "
                    f"{_bytes(plan.kv_bytes_total)}")]
    out = [
        kv_token,
        *kv_rows,
        ("weights = parameters × bytes(weight_dtype)" + (" ÷ (t × p)" if split else ""),
         f"{cfg.n_params:,} × {bytes_per_element(plan.weight_dtype):g} B{split} = "
         f"{_bytes(plan.weight_bytes)}"),
        ("total = weights + KV for the batch; budget = ⌊device memory × utilisation⌋",
         f"{_bytes(plan.weight_bytes)} + {_bytes(plan.kv_bytes_total)} = "
         f"{_bytes(plan.total_bytes)}; ⌊{plan.device_memory_bytes:,} B × "
         f"{plan.utilization:g}⌋ = {_bytes(plan.budget_bytes)}: "
         + ("fits" if plan.fits else "does NOT fit")),
        ("largest batch = ⌊(budget − weights) ÷ KV per request⌋",
         f"⌊({plan.budget_bytes:,} − {plan.weight_bytes:,}) ÷ "
         f"{plan.kv_bytes_per_request:,}⌋ = {plan.max_batch:,} sequences"),
        ("longest context = the longest whose KV per request × batch ≤ budget − weights",
         f"{plan.max_context:,} tokens") if windowed else
        ("longest context = ⌊(budget − weights) ÷ (KV per token × batch)⌋",
         f"⌊({plan.budget_bytes:,} − {plan.weight_bytes:,}) ÷ ({plan.kv_bytes_per_token:,} × "
         f"{plan.batch:,})⌋ = {plan.max_context:,} tokens"),
    ]
    if cfg.is_moe and plan.weight_bytes_per_step is not None:
        out.append(("weights read per decode step = (dense part + E·(1 − (1 − k/E)^batch) "
                    "experts per MoE layer) × bytes(weight_dtype)" + (" ÷ (t × p)" if split else ""),
                    f"{experts_touched(cfg.n_experts, cfg.n_experts_active, plan.batch):.2f} of "
                    f"{cfg.n_experts} experts{split} = {_bytes(plan.weight_bytes_per_step)}"))
    if plan.decode_tokens_per_s_bound is not None:
        out.append(("decode tokens/s ≤ batch × W ÷ (weights read per step + KV for the batch)",
                    f"{plan.batch:,} × {format_bandwidth(plan.bw_bytes_per_s)} ÷ "
                    f"{_bytes(_read_per_step(plan) + plan.kv_bytes_total)} = "
                    f"{plan.decode_tokens_per_s_bound:,.0f} tokens/s"))
    return out


def _bytes(n: int) -> str:
    return f"{n:,} B ({format_bytes(n)})"


def _read_per_step(plan) -> int:
    return plan.weight_bytes if plan.weight_bytes_per_step is None else plan.weight_bytes_per_step
