"""The batching lab's engine side above `serve` and `batchlab`: its settings, session (a
ServingEngine stepped one iteration at a time), snapshot section, headless run and bench.

It sits above both as kvlab sits above kv: `serve` uses `batchlab.records`, so nothing that
drives the serving engine can live in `batchlab` without an import circle.
"""
