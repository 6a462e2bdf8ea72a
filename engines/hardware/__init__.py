"""The machine InferLab runs on: what it has, how busy it is, and how fast it really is.

One module per concept, imported directly (this package imports nothing on its own, so that
importing one part never pulls in the others):

- `discovery`  - `DeviceInfo` for `cpu` and each `cuda:N`; `runtime_versions()`
- `telemetry`  - `TelemetrySampler` (CPU / RAM / GPU readings on a thread), `TelemetryHistory`
- `microbench` - measured roofs (`measure_roofs`) and measured operation points
- `ring_buffer`, `telemetry_history`, `nvml`, `cpu_info`, `versions`, `timing`, `cancel`,
  `op_points` - the pieces under them
- `presets`    - datasheet figures for known hardware
"""
