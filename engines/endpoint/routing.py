"""Which server a request goes to when the load drives several (a fleet of replicas, each its
own URL): the cluster simulator's router policies (engines/cluster/router.py), on what a
client sees.

    round-robin   the next server in turn
    least-tokens  the server with the fewest outstanding tokens: Σ prompt + requested tokens
                  of the requests sent to it that have not ended
    prefix        the server that was sent the longest prefix of this prompt (block hashes of
                  its words, as SGLang's router keeps an approximate tree of what it sent);
                  no match: least-tokens

A client has no token ids: a prompt's ids here are its words, each hashed to an integer
(crc32), so two prompts share a block exactly when they share those words."""

from __future__ import annotations

import zlib

from inferlab.engines.cluster.router import ROUTERS, RoutedInstance, Router

PREFIX_BLOCK_WORDS = 16
"""Words per block of the prefix router's hashes."""

__all__ = ["ROUTERS", "ServerRouter", "prompt_word_ids"]


def prompt_word_ids(prompt: str) -> list[int]:
    """The prompt's words as integers (crc32 of each), in order."""
    return [zlib.crc32(w.encode("utf-8")) for w in prompt.split()]


class ServerRouter:
    """`choose(prompt, tokens)` -> a server index, counting `tokens` as outstanding there
    until `done(index, tokens)`."""

    def __init__(self, policy: str, n_servers: int) -> None:
        self.router = Router(policy)
        self.servers = [RoutedInstance(None, PREFIX_BLOCK_WORDS) for _ in range(n_servers)]
        self.sent = [0] * n_servers

    def choose(self, prompt: str, tokens: int) -> int:
        if len(self.servers) == 1:
            i = 0
        else:
            ids = prompt_word_ids(prompt) if self.router.policy == "prefix" else []
            i = self.router.choose(ids, self.servers)
        self.servers[i].outstanding_tokens += tokens
        self.sent[i] += 1
        return i

    def done(self, index: int, tokens: int) -> None:
        self.servers[index].outstanding_tokens -= tokens
