"""Roofline math and the cost models built on it.

formulas.py  the roofline itself: intensity, attainable FLOP/s, knee, predicted time, bound
op_cost.py   OpCost, the (FLOPs, bytes) record every cost model returns
layer_costs.py / step_costs.py   matmul, attention and whole-model-step cost models
costs.py     the public face of the cost models
memory.py    KV-cache and VRAM calculator (MemoryPlan)
units.py     human-readable bytes and FLOP/s, always labelled binary or decimal
"""
