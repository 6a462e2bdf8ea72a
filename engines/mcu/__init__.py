"""The MCU lab's engines: .tflite import, TFLM lifetimes, arena planners.

- `graph`: `load_model(path_or_bytes) -> Model` (subgraph 0), `ModelError` for bad files.
- `lifetimes`: `model_buffers(model) -> list[Buffer]`, the buffers TFLM plans in its head.
- `planners`: `PLANNERS` (linear, tflm-greedy, best), `lower_bound_bytes`, `plan_model`.
"""
