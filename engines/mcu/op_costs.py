"""What an operator costs: `op_macs(model, i)`, its multiply-accumulates, for the per-op
tables, the cycle estimates of a board preset (MACs x cycles per MAC), the generated
firmware's tables and the recomputation of patch-based plans.
"""

from __future__ import annotations

from inferlab.engines.mcu.graph import Model


def op_macs(model: Model, op_index: int) -> int:
    """Multiply-accumulates of one operator, as its reference kernel performs them.

    CONV_2D: outputs x KH x KW x filter depth (taps in the padding are counted, as a
    cycle model of a padded kernel would). DEPTHWISE_CONV_2D: outputs x KH x KW.
    FULLY_CONNECTED: outputs x accum depth. Pooling: outputs x window (one add or compare
    per tap). ADD: one per output. SOFTMAX, QUANTIZE, DEQUANTIZE: one per element.
    RESHAPE and anything else: 0.
    """
    op = model.operators[op_index]
    tensors = model.tensors

    def shape_in(k: int) -> tuple[int, ...]:
        return tensors[op.inputs[k]].shape

    out = tensors[op.outputs[0]] if op.outputs else None
    n_out = out.elements if out is not None else 0
    if op.op == "CONV_2D":
        _, kh, kw, fcin = shape_in(1)
        return n_out * kh * kw * fcin
    if op.op == "DEPTHWISE_CONV_2D":
        _, kh, kw, _ = shape_in(1)
        return n_out * kh * kw
    if op.op == "FULLY_CONNECTED":
        return n_out * shape_in(1)[-1]
    if op.op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        return (
            n_out * int(op.options.get("filter_height", 1)) * int(op.options.get("filter_width", 1))
        )
    if op.op in ("ADD", "SOFTMAX", "QUANTIZE", "DEQUANTIZE"):
        return n_out
    return 0
