"""Cost models of inference operations: the one module other code imports them from.

Each returns an OpCost (FLOPs, bytes moved); counting rules are in the docstrings of
layer_costs.py (single operations), aten_costs.py (an aten op from its recorded shapes) and
step_costs.py (a whole model step).
"""

from inferlab.engines.roofline.aten_costs import aten_op_cost
from inferlab.engines.roofline.layer_costs import (
    attention_decode_cost,
    attention_prefill_cost,
    matmul_cost,
)
from inferlab.engines.roofline.op_cost import OpCost, sum_costs
from inferlab.engines.roofline.step_costs import (
    DEFAULT_BATCHES,
    DEFAULT_PREFILL_LENGTHS,
    decode_batch_sweep,
    decode_step_cost,
    decode_step_parts,
    prefill_length_sweep,
    prefill_step_cost,
    prefill_step_parts,
)

__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_PREFILL_LENGTHS",
    "OpCost",
    "aten_op_cost",
    "attention_decode_cost",
    "attention_prefill_cost",
    "decode_batch_sweep",
    "decode_step_cost",
    "decode_step_parts",
    "matmul_cost",
    "prefill_length_sweep",
    "prefill_step_cost",
    "prefill_step_parts",
    "sum_costs",
]
