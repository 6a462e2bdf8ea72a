"""Tensor lifetimes and kernel scratch buffers, exactly as TFLM's AllocationInfoBuilder marks them.

Time is counted in TFLM's "allocation scopes" (here: steps). Step 0 is the start of the
invocation; operator i (0-based, stored order) runs at step i + 1. For subgraph 0:

- graph inputs and graph outputs are created at step 0;
- operator i creates its outputs at step i + 1 (this overrides step 0 for a graph output
  an operator writes), and last-uses its inputs and its outputs at step i + 1;
- after the last operator, graph outputs are last-used at step N (the number of operators);
- a scratch buffer an operator's kernel requests lives at step i + 1 only.

A tensor is planned (gets arena space) when it has no constant data, is not a variable
(variables live in TFLM's persistent tail) and has a non-zero size. Sizes are rounded up
to 16 bytes, TFLM's arena buffer alignment. A non-constant tensor nothing creates keeps
TFLM's "uninitialised" first step, -1. Lifetimes are inclusive at both ends: two buffers
overlap in time when neither ends before the other starts.

Buffers come out in the order TFLM adds them to its planner: planned tensors by tensor
index, then scratch buffers in request order (operator order, then request order within
an operator). TFLM's greedy planner breaks size ties by this order, so it matters.

Scratch requests of TFLM's reference kernels that these models reach (checked against
TFLM's kernel sources and its measured arena sizes):

- SVDF: int8 input -> batch x num_filters x 4 bytes and batch x num_units x 4 bytes;
  float input -> batch x num_filters x 4 bytes.
- UNIDIRECTIONAL_SEQUENCE_LSTM: four buffers of batch x state_dimension x bytes of the
  cell state's type (batch is input dim 0, or dim 1 when time-major; state_dimension is
  dim 1 of the output-state tensor, input 18).
- SignalRfft (TFLM signal library): fft_length x bytes of the input's type.

The reference CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, pooling, SOFTMAX, RESHAPE,
elementwise and the other Signal ops request none. Optimised kernels (CMSIS-NN, ESP-NN,
Xtensa) request more; they are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.mcu.graph import ELEMENT_BYTES, Model, ModelError, Operator

ALIGNMENT_BYTES = 16  # MicroArenaBufferAlignment()

UNINITIALISED_STEP = -1


@dataclass(frozen=True)
class Buffer:
    """One arena buffer: `size` bytes live from step `first` to step `last` inclusive.

    `tensor` is the tensor index, or None for a kernel scratch buffer.
    """

    size: int
    first: int
    last: int
    tensor: int | None
    name: str

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.first <= other.last and other.first <= self.last

    def live_at(self, step: int) -> bool:
        return self.first <= step <= self.last


def align_up(nbytes: int, alignment: int = ALIGNMENT_BYTES) -> int:
    """`nbytes` rounded up to a multiple of `alignment` (TFLM's AlignSizeUp)."""
    return -(-nbytes // alignment) * alignment


def step_count(model: Model) -> int:
    """Steps 0..N for N operators: N + 1."""
    return len(model.operators) + 1


def tensor_lifetimes(model: Model) -> list[tuple[int, int]]:
    """(first, last) step for every tensor of subgraph 0, planned or not (-1: never)."""
    first = [UNINITIALISED_STEP] * len(model.tensors)
    last = [UNINITIALISED_STEP] * len(model.tensors)

    def create(t: int, step: int) -> None:
        first[t] = step
        last[t] = step

    for t in model.inputs:
        create(t, 0)
    for t in model.outputs:
        create(t, 0)
    for i, op in enumerate(model.operators):
        step = i + 1
        for t in op.outputs:
            create(t, step)
        for t in op.inputs:
            if t >= 0:
                last[t] = step
        for t in op.outputs:
            last[t] = step
    for t in model.outputs:
        last[t] = len(model.operators)
    return list(zip(first, last, strict=True))


def is_planned(model: Model, tensor: int) -> bool:
    """Whether TFLM gives this tensor space in the arena's planned head."""
    t = model.tensors[tensor]
    return not t.is_constant and not t.is_variable and t.nbytes > 0


def tensor_buffers(model: Model) -> list[Buffer]:
    """The planned tensors as buffers, by tensor index."""
    lifetimes = tensor_lifetimes(model)
    out = []
    for t in model.tensors:
        if is_planned(model, t.index):
            first, last = lifetimes[t.index]
            out.append(Buffer(align_up(t.nbytes), first, last, t.index, t.name or f"t{t.index}"))
    return out


def scratch_requests(model: Model, op: Operator) -> list[int]:
    """Bytes of each scratch buffer the reference kernel of `op` requests, in order."""
    tensors = model.tensors
    if op.op == "SVDF":
        x, weights_feature = tensors[op.inputs[0]], tensors[op.inputs[1]]
        batch, num_filters = x.shape[0], weights_feature.shape[0]
        rank = int(op.options.get("rank", 1)) or 1
        if x.dtype == "int8":
            return [batch * num_filters * 4, batch * (num_filters // rank) * 4]
        return [batch * num_filters * 4]
    if op.op == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        x, hidden, cell = (tensors[op.inputs[k]] for k in (0, 18, 19))
        batch = x.shape[1] if op.options.get("time_major") else x.shape[0]
        return [batch * hidden.shape[1] * ELEMENT_BYTES[cell.dtype]] * 4
    if op.op == "SignalRfft":
        x = tensors[op.inputs[0]]
        return [int(op.options["fft_length"]) * ELEMENT_BYTES[x.dtype]]
    return []


def scratch_buffers(model: Model, spans: list[tuple[int, int]] | None = None) -> list[Buffer]:
    """Kernel scratch buffers in execution order, each living over its operator's steps.

    `spans` as in `scheduled_lifetimes`; by default the stored order (operator i at step
    i + 1), which is TFLM's request order."""
    if spans is None:
        spans = order_spans(range(len(model.operators)))
    out = []
    for i in sorted(range(len(model.operators)), key=lambda i: spans[i]):
        op = model.operators[i]
        try:
            requests = scratch_requests(model, op)
        except (IndexError, KeyError, ValueError, TypeError) as exc:
            raise ModelError(
                f"operator {i} ({op.op}): cannot size its kernel scratch buffers "
                f"from its tensors and options ({exc!r})"
            ) from exc
        start, stop = spans[i]
        for k, nbytes in enumerate(requests):
            if nbytes > 0:
                out.append(Buffer(align_up(nbytes), start, stop, None, f"{op.op}#{i} scratch {k}"))
    return out


def model_buffers(model: Model) -> list[Buffer]:
    """Everything TFLM plans in the arena head, in the order it adds them to its planner."""
    return tensor_buffers(model) + scratch_buffers(model)


# ---- other schedules (operator reordering, patch-based stages) -----------------------------


def order_spans(order) -> list[tuple[int, int]]:
    """Per operator, the (start, stop) steps it runs at when executed in `order`
    (operator indices): the j-th operator run takes step j + 1."""
    spans = [(UNINITIALISED_STEP, UNINITIALISED_STEP)] * len(order)
    for j, i in enumerate(order):
        spans[i] = (j + 1, j + 1)
    return spans


def scheduled_lifetimes(
    model: Model, spans: list[tuple[int, int]], end_step: int
) -> list[tuple[int, int]]:
    """(first, last) step of every tensor when operator i runs from step spans[i][0] to
    spans[i][1], with TFLM's rules otherwise: graph inputs and outputs exist from step 0,
    an operator creates its outputs at its first step and last-uses its inputs and outputs
    at its last step, graph outputs live to `end_step`.

    The stored order is `spans = order_spans(range(N))`, `end_step = N`, and gives
    `tensor_lifetimes(model)`. An operator spanning several steps is one that runs a patch
    at a time (engines.mcu.patching): its input must stay until its last patch has read it,
    its output exists from its first patch on.
    """
    first = [UNINITIALISED_STEP] * len(model.tensors)
    last = [UNINITIALISED_STEP] * len(model.tensors)
    for t in (*model.inputs, *model.outputs):
        first[t] = last[t] = 0
    for i in sorted(range(len(model.operators)), key=lambda i: spans[i]):
        op, (start, stop) = model.operators[i], spans[i]
        for t in op.outputs:
            first[t] = last[t] = start
        for t in op.inputs:
            if t >= 0:
                last[t] = max(last[t], stop)
        for t in op.outputs:
            last[t] = max(last[t], stop)
    for t in model.outputs:
        last[t] = end_step
    return list(zip(first, last, strict=True))


def scheduled_buffers(
    model: Model,
    spans: list[tuple[int, int]],
    end_step: int,
    skip_tensors=(),
) -> list[Buffer]:
    """The arena buffers of a schedule (see `scheduled_lifetimes`): planned tensors by tensor
    index (but `skip_tensors`, which the schedule never holds whole), then kernel scratch
    buffers in execution order, each living over its operator's steps."""
    lifetimes = scheduled_lifetimes(model, spans, end_step)
    skip = set(skip_tensors)
    out = []
    for t in model.tensors:
        if t.index not in skip and is_planned(model, t.index):
            first, last = lifetimes[t.index]
            out.append(Buffer(align_up(t.nbytes), first, last, t.index, t.name or f"t{t.index}"))
    return out + scratch_buffers(model, spans)
