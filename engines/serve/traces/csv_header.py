"""The header row of a CSV trace: the columns a reader needs, found by name (case, spaces
around names and column order do not matter; other columns are ignored)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator

from inferlab.engines.serve.traces.record import TraceError


def csv_rows(lines: Iterable[str], name: str, columns: tuple[str, ...]
             ) -> tuple[csv.reader, list[int]] | None:
    """(the csv reader past its header, each wanted column's index), or None for a file with
    no header (an empty file). TraceError names a missing column."""
    reader = csv.reader(lines)
    header = next(reader, None)
    while header is not None and not any(cell.strip() for cell in header):
        header = next(reader, None)
    if header is None:
        return None
    keys = [cell.strip().lstrip("\ufeff").casefold() for cell in header]
    found = []
    for column in columns:
        if column.casefold() not in keys:
            raise TraceError(f"{name} line {reader.line_num}: the header has no column "
                             f"'{column}' (it has {', '.join(map(repr, header))[:200]})")
        found.append(keys.index(column.casefold()))
    return reader, found


def cells(reader, name: str, width: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, row) for each non-blank row of at least `width` cells."""
    for row in reader:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) < width:
            raise TraceError(f"{name} line {reader.line_num}: {len(row)} cells, the header "
                             f"names {width}")
        yield reader.line_num, row
