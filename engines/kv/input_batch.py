"""`InputBatch`: a step's attention metadata from block tables kept as one tensor across steps.

`build_attention_metadata` rebuilds every sequence's block table, slot mapping and positions
from Python lists each step: at 32 sequences that is hundreds of small tensors per step,
several milliseconds of host time beside a forward of tens. vLLM v1 keeps the tables in a
persistent input batch instead; so does this:

    tables [rows, width] int32   one row per sequence seen, kept from step to step; a row
                                 only takes the block ids appended since the last step, and
                                 is rewritten when the BlockManager says an entry changed
                                 (copy-on-write, truncation) or the id was freed and
                                 allocated again
    positions, slot_mapping      computed for the whole batch at once from the rows:
                                 slot = tables[row, pos // block_size] * block_size
                                        + pos % block_size

`metadata(seq_ids, query_lens, query_starts)` returns what `build_attention_metadata` returns
for the same arguments, field for field (the tests hold it to that after random allocations,
appends, forks, truncations and frees). `GroupedInputBatch` keeps one per layer group of a
`KVCacheCoordinator` and hands out `GroupedMetadata` (one group: that group's metadata).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from inferlab.engines.kv.attention_metadata import (
    AttentionMetadata,
    GroupedMetadata,
    query_span,
)
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.group_coordinator import KVCacheCoordinator

_MIN_ROWS = 8
_MIN_WIDTH = 16


class InputBatch:
    """Persistent block tables over `manager`'s sequences; `metadata` builds a step from them."""

    def __init__(self, manager: BlockManager, device: torch.device | str | None = None) -> None:
        self.manager = manager
        self.device = device
        self.tables = torch.zeros((_MIN_ROWS, _MIN_WIDTH), dtype=torch.int32)
        self._rows: dict[object, int] = {}
        # per row: (the sequence record, its table version, how many entries are written)
        self._state: list[tuple[object, int, int] | None] = [None] * _MIN_ROWS
        self._free_rows = list(range(_MIN_ROWS - 1, -1, -1))
        self.n_row_writes = 0
        """Rows written (appended to or rewritten), ever: what the tests watch."""

    def metadata(self, seq_ids: Sequence[object], query_lens: Sequence[int],
                 query_starts: Sequence[int] | None = None) -> AttentionMetadata:
        """As `build_attention_metadata(manager, seq_ids, query_lens, device, query_starts)`."""
        if len(seq_ids) != len(query_lens):
            raise ValueError("one query length per sequence")
        if query_starts is not None and len(query_starts) != len(seq_ids):
            raise ValueError("one query start per sequence")
        rows, starts, ctx, n_blocks = [], [], [], []
        for i, (seq_id, n_q) in enumerate(zip(seq_ids, query_lens, strict=True)):
            start, n_ctx = query_span(self.manager, seq_id, n_q,
                                      None if query_starts is None else query_starts[i])
            row, n = self._sync(seq_id)
            rows.append(row)
            starts.append(start)
            ctx.append(n_ctx)
            n_blocks.append(n)
        q_lens = [int(n) for n in query_lens]
        loc = [0]
        for n_q in q_lens:
            loc.append(loc[-1] + n_q)
        rows_t = torch.tensor(rows, dtype=torch.int64)
        width = max(n_blocks, default=0)
        tables = self.tables.index_select(0, rows_t)[:, :width].contiguous()
        bs = self.manager.block_size
        if all(n == 1 for n in q_lens):  # decode: one position per sequence
            positions = torch.tensor(starts, dtype=torch.int64)
            seq_of_token = torch.arange(len(rows), dtype=torch.int64)
        else:
            lens_t = torch.tensor(q_lens, dtype=torch.int64)
            seq_of_token = torch.repeat_interleave(torch.arange(len(rows)), lens_t)
            offsets = torch.tensor(starts, dtype=torch.int64) - torch.tensor(loc[:-1])
            positions = torch.arange(loc[-1], dtype=torch.int64) + offsets[seq_of_token]
        blocks = tables[seq_of_token, positions // bs].to(torch.int64) if len(rows) else \
            torch.empty(0, dtype=torch.int64)
        slots = blocks * bs + positions % bs

        def put(t: torch.Tensor) -> torch.Tensor:
            return t if self.device is None else t.to(self.device)

        return AttentionMetadata(
            seq_ids=tuple(seq_ids),
            query_lens=tuple(q_lens),
            context_lens_host=tuple(ctx),
            positions=put(positions),
            slot_mapping=put(slots),
            query_start_loc=put(torch.tensor(loc, dtype=torch.int32)),
            context_lens=put(torch.tensor(ctx, dtype=torch.int32)),
            block_tables=put(tables),
        )

    def release(self, seq_id: object) -> None:
        """Give `seq_id`'s row back (a freed sequence; a later one may take the row)."""
        row = self._rows.pop(seq_id, None)
        if row is not None:
            self._state[row] = None
            self._free_rows.append(row)

    def _sync(self, seq_id: object) -> tuple[int, int]:
        """`seq_id`'s row, brought up to date with the manager; (row, its block count)."""
        record, version, blocks = self.manager.table_state(seq_id)
        row = self._rows.get(seq_id)
        if row is None:
            if len(self._rows) >= len(self._state) // 2:
                self._sweep()
            row = self._take_row()
            self._rows[seq_id] = row
            state = None
        else:
            state = self._state[row]
        n = len(blocks)
        if n > self.tables.shape[1]:
            self._grow(self.tables.shape[0], max(n, 2 * self.tables.shape[1]))
        if state is not None and state[0] is record and state[1] == version:
            written = state[2]
            if n > written:  # appended since: write the new ids only
                self.tables[row, written:n] = torch.tensor(
                    [b.block_id for b in blocks[written:]], dtype=torch.int32)
                self.n_row_writes += 1
        else:  # new here, freed and allocated again, or an entry changed: the whole row
            line = self.tables[row]
            line.zero_()
            if n:
                line[:n] = torch.tensor([b.block_id for b in blocks], dtype=torch.int32)
            self.n_row_writes += 1
        self._state[row] = (record, version, n)
        return row, n

    def _take_row(self) -> int:
        if not self._free_rows:
            old = self.tables.shape[0]
            self._grow(2 * old, self.tables.shape[1])
            self._state.extend([None] * old)
            self._free_rows = list(range(2 * old - 1, old - 1, -1))
        return self._free_rows.pop()

    def _sweep(self) -> None:
        """Release the rows of ids the manager no longer holds (freed sequences)."""
        for seq_id in [s for s in self._rows if s not in self.manager]:
            self.release(seq_id)

    def _grow(self, n_rows: int, width: int) -> None:
        grown = torch.zeros((n_rows, width), dtype=torch.int32)
        old_rows, old_width = self.tables.shape
        grown[:old_rows, :old_width] = self.tables
        self.tables = grown


class GroupedInputBatch:
    """An `InputBatch` per layer group of `coordinator`: a step's metadata in each group
    (`GroupedMetadata`; with one group, that group's `AttentionMetadata` as it is)."""

    def __init__(self, coordinator: KVCacheCoordinator,
                 device: torch.device | str | None = None) -> None:
        self.batches = tuple(InputBatch(m, device) for m in coordinator.managers)
        self.layer_group = coordinator.layer_group

    def metadata(self, seq_ids: Sequence[object], query_lens: Sequence[int],
                 query_starts: Sequence[int] | None = None
                 ) -> AttentionMetadata | GroupedMetadata:
        metas = tuple(b.metadata(seq_ids, query_lens, query_starts) for b in self.batches)
        return metas[0] if len(metas) == 1 else GroupedMetadata(metas, self.layer_group)

    def release(self, seq_id: object) -> None:
        for batch in self.batches:
            batch.release(seq_id)
