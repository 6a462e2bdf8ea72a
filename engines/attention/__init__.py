"""Attention three ways, each a stepped engine (one step = one tile) that counts every byte it
moves to and from main memory and the working set it holds on chip.

    naive.py       S = QKᵀ/√d and P = softmax(S) materialised (Algorithm 0)
    tiled.py       FlashAttention-2's order: online softmax, S and P stay on chip
    split_k.py     Flash-Decoding: one query row, the context in chunks combined by (m, ℓ)
    traffic.py     the closed forms of what each moves (one function each)
    step.py        the step record and the counting every engine shares
    executions.py  the three by name: engine, closed form, torch SDPA reference
    native.py      the tiled loop in C on the native library (engines/kernels), for timing

No lab concern lives here: the attention lab (engines/labs/attention) drives these.
"""
