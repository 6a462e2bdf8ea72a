"""The batching lab: its settings, session (a ServingEngine stepped one iteration at a time),
snapshot record and section (reader and writer), trace events, timeline (the Gantt's rows
from the records), the Compare and Rate sweep runs and their records, headless run and
benches (`bench`, `prefix_bench`, `concurrent_bench` with its vLLM peer).

It sits above `engines/serve`, whose `ServingEngine` hands out the records it draws
(`serve.records`: `IterationRecord` per iteration, `RequestInfo` per request); the serving
engine imports nothing from here.
"""
