"""Where a step's time goes: profiles read op by op.

chrome_trace.py  a torch.profiler Chrome trace (.json / .json.gz) read as a stream: its complete
                 events and process / thread names; TraceReadError for a file that is not one
json_split.py    the event list cut into runs of whole events as the bytes arrive (each run
                 parsed in one msgspec call)
kernel_table.py  per op or kernel name: calls, total and mean time, share of the level's time
breakdown.py     per GPU stream or CPU thread: compute, memory, communication and idle time
                 (Holistic Trace Analysis's split)
bench.py         trace_read_mb_per_s: the streamed read of a generated 200 MB trace
"""
