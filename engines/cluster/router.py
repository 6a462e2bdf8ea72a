"""Which instance a request goes to. Each policy sees the instances as they are when the
request arrives, on the simulated clock:

    round-robin   the next instance in turn
    least-tokens  the instance with the fewest outstanding tokens: Σ over the unfinished
                  requests routed to it of prompt + max_new_tokens − outputs so far
    prefix        the instance that holds the longest prefix of the prompt — its own prefix
                  cache when it has one (BlockManager.cached_prefix_len, hash or radix),
                  else the router's own record of the block hashes it sent there (chained
                  as vLLM's, never evicted: an approximation, as SGLang's router keeps);
                  no match anywhere, or a tie: least-tokens
"""

from __future__ import annotations

from collections.abc import Sequence

from inferlab.engines.kv.prefix_cache import ROOT_HASH, hash_block_tokens

ROUND_ROBIN = "round-robin"
LEAST_TOKENS = "least-tokens"
PREFIX = "prefix"
ROUTERS = (ROUND_ROBIN, LEAST_TOKENS, PREFIX)


class RoutedInstance:
    """What the router reads of an instance: its outstanding tokens, its prefix cache (the
    BlockManager, or None), the block hashes it was sent."""

    def __init__(self, blocks, block_size: int) -> None:
        self.blocks = blocks
        self.block_size = block_size
        self.outstanding_tokens = 0
        self.sent_hashes: set[int] = set()

    def cached_prefix_tokens(self, prompt: Sequence[int]) -> int:
        if self.blocks is not None and self.blocks.enable_prefix_caching:
            return self.blocks.cached_prefix_len(prompt)
        n = 0
        for h in block_hashes(prompt, self.block_size):
            if h not in self.sent_hashes:
                break
            n += self.block_size
        return n

    def remember(self, prompt: Sequence[int]) -> None:
        if self.blocks is None or not self.blocks.enable_prefix_caching:
            self.sent_hashes.update(block_hashes(prompt, self.block_size))


def block_hashes(prompt: Sequence[int], block_size: int) -> list[int]:
    """The chained hashes of the prompt's full blocks (engines/kv's hash_block_tokens)."""
    out, parent = [], ROOT_HASH
    for i in range(0, len(prompt) - block_size + 1, block_size):
        parent = hash_block_tokens(parent, tuple(prompt[i:i + block_size]))
        out.append(parent)
    return out


class Router:
    """`choose(prompt, instances)` -> the index of the instance a request goes to. Ties (an
    idle cluster: every instance at 0 outstanding tokens) go to the instance chosen longest
    ago, so that load spreads instead of piling on the first."""

    def __init__(self, policy: str) -> None:
        if policy not in ROUTERS:
            raise ValueError(f"router must be one of {', '.join(ROUTERS)}, got {policy!r}")
        self.policy = policy
        self._turn = 0
        # instance -> the turn it was last chosen (keyed by the instance itself, so that an
        # autoscaled fleet's instances keep their turns when the list grows or shrinks)
        self._chosen_at: dict[RoutedInstance, int] = {}

    def choose(self, prompt: Sequence[int], instances: Sequence[RoutedInstance]) -> int:
        if self.policy == ROUND_ROBIN:
            i = self._turn % len(instances)
        elif self.policy == LEAST_TOKENS:
            i = self._least_tokens(instances)
        else:
            matched = [inst.cached_prefix_tokens(prompt) for inst in instances]
            best = max(matched)
            among = None if best == 0 else [j for j, m in enumerate(matched) if m == best]
            i = self._least_tokens(instances, among)
        self._chosen_at[instances[i]] = self._turn
        self._turn += 1
        if self.policy == PREFIX:  # only the prefix policy reads what was sent where
            instances[i].remember(prompt)
        return i

    def _least_tokens(self, instances: Sequence[RoutedInstance],
                      among: Sequence[int] | None = None) -> int:
        """The instance (of `among`, default all) with the fewest outstanding tokens; on a
        tie the one chosen longest ago (never chosen: the first)."""
        among = range(len(instances)) if among is None else among
        never = -len(instances)  # never chosen: before any turn, the first index first
        return min(among, key=lambda j: (instances[j].outstanding_tokens,
                                         self._chosen_at.get(instances[j], never + j)))
