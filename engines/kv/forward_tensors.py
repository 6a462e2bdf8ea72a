"""The tensors a forward reads from block tables: slot mappings, padded block tables and
context lengths, built from `SeqBlocks` records (the block manager hands them its own).

    slot = block_table[pos // block_size] * block_size + pos % block_size
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from inferlab.engines.kv.seq_blocks import SeqBlocks


def slot_mapping(seq: SeqBlocks, positions: Iterable[int] | torch.Tensor, block_size: int,
                 seq_id: object) -> torch.Tensor:
    """Flat cache slots (int64) of `seq`'s tokens at `positions` (IndexError past its
    reserved tokens, naming `seq_id`)."""
    pos = torch.as_tensor(
        positions if isinstance(positions, torch.Tensor) else list(positions),
        dtype=torch.int64,
    )
    if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= len(seq.token_ids)):
        raise IndexError(
            f"positions {int(pos.min())}..{int(pos.max())} outside sequence {seq_id!r}'s "
            f"{len(seq.token_ids)} reserved tokens"
        )
    table = torch.tensor([b.block_id for b in seq.blocks], dtype=torch.int64)
    return table[pos // block_size] * block_size + pos % block_size


def block_table_tensor(seqs: Sequence[SeqBlocks], device: torch.device | str | None = None,
                       pad: int = 0) -> torch.Tensor:
    """int32 [n_seqs, max_blocks] block tables, short rows padded with `pad`.

    Padding entries are never read: attention masks keys at or past the context lengths.
    """
    tables = [[b.block_id for b in seq.blocks] for seq in seqs]
    width = max((len(t) for t in tables), default=0)
    out = torch.full((len(tables), width), pad, dtype=torch.int32)
    for row, table in enumerate(tables):
        out[row, : len(table)] = torch.tensor(table, dtype=torch.int32)
    return out if device is None else out.to(device)


def context_lens_tensor(seqs: Sequence[SeqBlocks],
                        device: torch.device | str | None = None) -> torch.Tensor:
    """int32 [n_seqs]: reserved tokens per sequence (the keys attention reads)."""
    out = torch.tensor([len(seq.token_ids) for seq in seqs], dtype=torch.int32)
    return out if device is None else out.to(device)
