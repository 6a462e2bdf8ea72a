"""A GET whose body is read only so far: a server that streams for ever cannot fill memory."""

from __future__ import annotations

import httpx


async def get_capped(client: httpx.AsyncClient, path: str, max_bytes: int,
                     timeout_s: float) -> tuple[httpx.Response, bytes]:
    """GET `path`: the reply, and its body (a 200's only) read to `max_bytes` and one piece
    more at most (the caller sees it is over the cap by its length)."""
    pieces, size = [], 0
    async with client.stream("GET", path, timeout=timeout_s) as resp:
        if resp.status_code == 200:
            async for piece in resp.aiter_bytes():
                pieces.append(piece)
                size += len(piece)
                if size > max_bytes:
                    break
    return resp, b"".join(pieces)
