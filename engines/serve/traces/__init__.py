"""Public LLM serving traces read as one workload record (`record.TraceRequest`): one small
streamed reader per published format, the format recognised from the content (`detect.py`),
window / time-scale / sample applied while streaming (`stream.py`), and block hash ids made
into token content (`content.py`)."""
