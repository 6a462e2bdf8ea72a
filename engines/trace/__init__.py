"""Profiling: the trace recorder (spans, counters, instants) and the snapshot file.

- `jsonable`: turn records, numpy arrays and tensors into plain JSON values.
- `recorder`: `TraceRecorder`, thread-safe Chrome Trace Event recording.
- `snapshot`: the `inferlab.snapshot/1` file, a Chrome/Perfetto trace that also holds every
  lab's settings, state and metrics; written atomically, read with validation.
"""
