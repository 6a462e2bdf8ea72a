"""The arena side of the MCU lab: a .tflite model planned into ONE arena and run there.

- `graph`: `load_model(path_or_bytes) -> Model` (subgraph 0), `ModelError` for bad files.
- `lifetimes`: `model_buffers(model) -> list[Buffer]`, the buffers TFLM plans in its head.
- `planners`: buffers in, offsets out: `PLANNERS` (linear, tflm-greedy, best),
  `lower_bound_bytes`, `plan_buffers`; `plan`: the `Plan` record they return.
- `aliasing`, `reorder`, `patching`: the model-level planners; `model_planners.plan_model`
  runs any planner by name.
- `interpreter` and `kernels`: the INT8 reference interpreter inside the planned arena;
  `op_costs.op_macs`: an operator's multiply-accumulates; `inputs.random_input`.
- `examples`: the shipped example models (the lab's bench, `inferlab bench mcu`, is
  `engines/labs/mcu/bench.py`).

The board side (`engines.board`) imports this package, never the reverse.
"""
