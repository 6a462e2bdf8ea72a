"""The batching lab's engine side: its state records (`records`), without Qt.

The serving engine (`engines/serve`) hands out one `IterationRecord` per iteration; the lab's
timeline and strips draw them beside the `RequestInfo` of every request.
"""
