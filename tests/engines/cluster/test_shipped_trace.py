"""The shipped window of Azure's 2023 conversation trace (assets/traces): it reads with the
Azure reader, holds the rows and bytes its SOURCES.md says, and spans under 20 minutes."""

import hashlib
import importlib.resources
import re

from inferlab.engines.serve.traces.stream import read_trace, trace_format

TRACES = importlib.resources.files("inferlab.assets") / "traces"
NAME = "azure_conv_2023_first20min.csv"


def _source_note() -> str:
    return (TRACES / "SOURCES.md").read_text(encoding="utf-8")


def test_shipped_azure_window_reads_with_the_azure_reader_and_has_the_stated_rows():
    with importlib.resources.as_file(TRACES / NAME) as path:
        assert trace_format(path) == "azure"
        records = list(read_trace(path))
    stated = int(re.search(r"first \*\*([\d,]+) rows\*\*", _source_note()).group(1)
                 .replace(",", ""))
    assert len(records) == stated == 5985
    assert records[0].arrival_s == 0.0
    assert 1190 < records[-1].arrival_s < 1200  # the first 20 minutes, nothing past
    assert all(r.input_tokens > 0 and r.output_tokens > 0 for r in records)
    # the first row as the source file has it: 2023-11-16 18:15:46.6805900,374,44
    assert (records[0].input_tokens, records[0].output_tokens) == (374, 44)


def test_shipped_azure_window_is_the_bytes_its_note_names():
    data = (TRACES / NAME).read_bytes()
    note = _source_note()
    assert f"first {len(data):,} bytes" in note
    assert hashlib.sha256(data).hexdigest() in note
    assert data.startswith(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
    assert data.count(b"\r\n") == 5985 + 1
    assert (TRACES / "LICENSE").read_text(encoding="utf-8-sig").startswith(
        "Attribution 4.0 International")
