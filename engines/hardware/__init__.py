"""Hardware: device discovery, datasheet presets, micro-benchmarks and telemetry."""
