"""The draft-verify loop over the real model: draft K, score K + 1 positions in ONE target
forward through the paged cache, accept, roll the rejected drafts back.

One step, with the text so far = prompt + out (out[-1] not yet run by the target):

    drafts = drafter.propose(prompt + out, K)           # d_1 .. d_K (and their q)
    runner.append_tokens(seq, [out[-1], *drafts])       # K + 1 slots reserved at once
    p_0 .. p_K = runner.step(seq, logits=[K + 1])        # ONE forward (the first step: the
                                                         # whole prompt + K drafts)
    verdict = verify_drafts(p, drafts, settings, q)      # exact rejection sampler / greedy
    out += d_1 .. d_n + y                                # n accepted, y resampled or bonus
    runner.truncate(seq, len(prompt + out) - 1)          # rejected drafts leave the cache

After every step the target's KV cache holds exactly prompt + out[:-1] (all computed), and a
model drafter's cache a prefix of the text plus its own last drafts (it rolls back itself).

Token trees (`tree_width` W > 1, a drafter with `propose_candidates`: the n-gram drafter):
up to W candidate continuations of up to K tokens each, merged by shared prefixes into a
`TokenTree` of N nodes, are verified in the same ONE forward through the paged cache:

    runner.append_tokens(seq, [out[-1], *tree.tokens])     # the nodes in index order
    positions, mask = tree_attention(tree, start, pending)  # node i at base + level(i); it
                                                            # sees the prefix, its ancestors
    p_root, p_0 .. p_{N-1} = runner.forward_masked(seq, start, positions, mask, N + 1)
    verdict = verify_tree(tree, p, settings)                # greedy: the argmax path; else
                                                            # multi-candidate rejection
    runner.compact(seq, base, [base + i for i in path])     # the path's K/V moved into
                                                            # place, the rest truncated

so the cache again holds exactly prompt + out[:-1]. A tree step's record keeps the chain
fields meaningful (`drafted`: the first candidate that starts with the accepted path,
`accepted` its verdict) and adds the whole tree (`tree_tokens`, `tree_parents`, `tree_path`).
W = 1 is the chain loop above, unchanged.
Each step hands out a frozen `SpeculativeStep`; `SpeculativeRun` gathers them with the
statistics (statistics.py). K is capped by the tokens still to emit (K_eff = min(K, left-1));
with no draft (the n-gram drafter found no match, or one token left) a step is a plain
target step emitting one token (fate BONUS: every draft, none, was accepted).

p and q in a record are the probabilities of each emitted token under the distributions the
step used: the filtered p and q when sampling; in greedy mode the temperature-1 softmax of
the target's and the draft's logits (argmax has no distribution of its own). q is None for a
token the target chose (resampled or bonus); 1.0 for a certain draft (prompt lookup).
A drafter with `observe_target(first_position, token_ids, hidden)` (a trained head: heads/)
is handed, after each verify forward, the tokens it ran and their last-layer hidden states
(`ModelRunner.keep_hidden`; after a tree step, those of the pending tokens and the accepted
path, in the positions compaction gives them); what it drafts next may read them.

"""

from __future__ import annotations

import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from inferlab.engines.model.llama import Llama
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.model.tokenizer import Tokenizer
from inferlab.engines.speculative import mass
from inferlab.engines.speculative.adaptive_k import KPolicy
from inferlab.engines.speculative.drafter import Drafter, Proposal
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.rejection import verify_drafts
from inferlab.engines.speculative.sampling import GREEDY, SamplingSettings, filtered_probs
from inferlab.engines.speculative.statistics import AcceptanceStats, acceptance_stats
from inferlab.engines.speculative.tree import TokenTree, tree_attention
from inferlab.engines.speculative.tree_rejection import verify_tree
from inferlab.engines.speculative.verification import TokenFate, Verification

_SEQ = "target"


@dataclass(frozen=True)
class SpeculativeStep:
    """One draft-verify step. `drafted` / `accepted`: the drafts and the verifier's verdict on
    each; `token_ids` / `fates` / `p` / `q`: what the step emitted (cut at a stop token or the
    length limit, so possibly fewer than n_accepted + 1)."""

    index: int
    drafted: tuple[int, ...]
    accepted: tuple[bool, ...]
    token_ids: tuple[int, ...]
    fates: tuple[TokenFate, ...]
    p: tuple[float, ...]
    q: tuple[float | None, ...]
    target_tokens: int
    """Query tokens the target's one forward ran (K + 1; the first step adds the prompt)."""
    target_forward_s: float
    draft_s: float
    finish_reason: str | None = None
    """None while the run goes on; "stop" (a stop token, not emitted) or "length"."""
    tree_tokens: tuple[int, ...] = ()
    """A tree step's nodes (their tokens, in index order); empty for a chain step. `drafted`
    is then the first candidate continuation that starts with the accepted path."""
    tree_parents: tuple[int, ...] = ()
    """Each node's parent (-1: below the root, the last committed token)."""
    tree_path: tuple[int, ...] = ()
    """The accepted nodes, top level first (their tokens are token_ids[:n_accepted])."""

    @property
    def tree(self) -> TokenTree | None:
        """The step's token tree (None: a chain step)."""
        return TokenTree(self.tree_tokens, self.tree_parents) if self.tree_tokens else None

    @property
    def n_accepted(self) -> int:
        return sum(self.accepted)

    @property
    def rejected(self) -> tuple[int, ...]:
        """The drafts the verifier threw away."""
        return tuple(t for t, ok in zip(self.drafted, self.accepted, strict=True) if not ok)


@dataclass(frozen=True)
class SpeculativeRun:
    """A whole prompt decoded speculatively."""

    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    finish_reason: str
    k: int
    drafter: str
    steps: tuple[SpeculativeStep, ...] = field(repr=False)
    wall_s: float = 0.0
    tree_width: int = 1

    @property
    def target_forwards(self) -> int:
        return len(self.steps)

    @property
    def tokens_per_target_forward(self) -> float:
        return len(self.token_ids) / len(self.steps) if self.steps else 0.0

    @property
    def stats(self) -> AcceptanceStats:
        return acceptance_stats([s.accepted for s in self.steps])

    @property
    def acceptance_rate(self) -> float:
        return self.stats.acceptance_rate

    @property
    def mean_acceptance_length(self) -> float:
        return self.stats.mean_acceptance_length

    @property
    def target_forward_s(self) -> float:
        return sum(s.target_forward_s for s in self.steps)

    @property
    def draft_s(self) -> float:
        return sum(s.draft_s for s in self.steps)


def _check_int(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SpeculativeError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def _same_tokenizer(a: Tokenizer, b: Tokenizer) -> bool:
    return (a.backend.get_vocab(with_added_tokens=True)
            == b.backend.get_vocab(with_added_tokens=True))


class SpeculativeDecoder:
    """Speculative decoding of one prompt at a time with `target` and `drafter`.

    `settings` apply to target and draft alike (a model drafter must have been built with the
    same); `seed` seeds the verifier's uniforms. `tokenizer` (the target's), when given, is
    compared with a model drafter's. `tree_width` W > 1 verifies up to W candidate
    continuations as one token tree per step (the drafter must have `propose_candidates`).
    Bad input raises SpeculativeError naming the parameter before anything runs.
    """

    def __init__(self, target: Llama, drafter: Drafter, k: int = 4,
                 settings: SamplingSettings = GREEDY, seed: int = 0,
                 tokenizer: Tokenizer | None = None, block_size: int = 16,
                 tree_width: int = 1, k_policy: KPolicy | None = None) -> None:
        self.k_policy = k_policy
        if k_policy is not None:
            if not isinstance(k_policy, KPolicy):
                raise SpeculativeError(f"k_policy must be a KPolicy (AdaptiveK, HeuristicK), "
                                       f"got {k_policy!r}")
            if tree_width != 1:
                raise SpeculativeError("k_policy chooses a chain's length: tree_width must be 1")
            k = k_policy.k_max  # the most it can choose: what the cache is sized for
        self.k = _check_int(k, "k", 1)
        self.tree_width = _check_int(tree_width, "tree_width", 1)
        if not isinstance(settings, SamplingSettings):
            raise SpeculativeError(f"settings must be SamplingSettings, got {settings!r}")
        _check_int(seed, "seed", -(2**63))
        _check_int(block_size, "block_size", 1)
        if not callable(getattr(drafter, "propose", None)):
            raise SpeculativeError(f"drafter {drafter!r} has no propose(token_ids, k)")
        vocab = target.config.vocab_size
        draft_vocab = getattr(drafter, "vocab_size", None)
        name = getattr(drafter, "name", type(drafter).__name__)
        if draft_vocab is not None and draft_vocab != vocab:
            raise SpeculativeError(
                f"drafter {name}: its vocabulary has {draft_vocab} tokens, the target's "
                f"{vocab}; a draft model must use the target's tokenizer")
        draft_tok = getattr(drafter, "tokenizer", None)
        if tokenizer is not None and draft_tok is not None and not _same_tokenizer(tokenizer,
                                                                                   draft_tok):
            raise SpeculativeError(
                f"drafter {name}: its tokenizer ({draft_tok.name or '?'}) differs from the "
                f"target's ({tokenizer.name or '?'}); a draft model must use the target's "
                "tokenizer")
        if self.tree_width > 1 and not callable(getattr(drafter, "propose_candidates", None)):
            raise SpeculativeError(
                f"tree_width {tree_width}: drafter {name} proposes one continuation; token "
                "trees need a drafter with propose_candidates (ngram, eagle)")
        draft_settings = getattr(drafter, "settings", None)
        if draft_settings is not None and draft_settings != settings:
            raise SpeculativeError(
                f"drafter {name} samples with {draft_settings}, the decoder with {settings}: "
                "the draft must be sampled with the verifier's settings (exactness needs it)")
        self.target = target
        self.drafter = drafter
        self.drafter_name = name
        self.settings = settings
        self.seed = seed
        self.block_size = block_size
        self.generator = torch.Generator().manual_seed(seed)
        self.runner: ModelRunner | None = None
        """The target's runner for the prompt being decoded (None before `start`)."""
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.steps: list[SpeculativeStep] = []
        self.finish_reason: str | None = None
        self._max_new = 0
        self._stops: frozenset[int] = frozenset()

    # ---- one prompt, step by step -------------------------------------------------------------

    def start(self, prompt_ids: Sequence[int], max_new_tokens: int,
              stop_token_ids: Sequence[int] = ()) -> None:
        """Begin decoding `prompt_ids` (checked; nothing is allocated on bad input)."""
        prompt = self._prompt(prompt_ids)
        _check_int(max_new_tokens, "max_new_tokens", 1)
        limit = self.target.config.max_position
        need = len(prompt) + max_new_tokens + self.k
        if need > limit:
            raise SpeculativeError(
                f"prompt ({len(prompt)}) + max_new_tokens ({max_new_tokens}) + k ({self.k}) "
                f"is {need} tokens, past the target's context of {limit}")
        stops = frozenset(_token(t, "stop_token_ids") for t in stop_token_ids)
        self.close()
        n_blocks = -(-need // self.block_size) + 1
        n_blocks += -(-self.k * (self.tree_width - 1) // self.block_size)  # a tree's nodes
        self.runner = ModelRunner(self.target, n_blocks=n_blocks, block_size=self.block_size)
        self.runner.add(_SEQ, prompt)
        # a trained draft head (heads/) reads the target's last hidden states of each forward
        self.runner.keep_hidden = callable(getattr(self.drafter, "observe_target", None))
        reset = getattr(self.drafter, "reset", None)
        if callable(reset):
            reset()
        self.prompt, self.output, self.steps = prompt, [], []
        self.finish_reason = None
        self._max_new, self._stops = max_new_tokens, stops

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    def step(self) -> SpeculativeStep:
        """Draft, verify in one target forward, keep the accepted tokens, roll back the rest."""
        if self.runner is None or self.done:
            raise SpeculativeError("no prompt is being decoded: call start() first")
        runner, out = self.runner, self.output
        text = self.prompt + out
        wanted = self.k if self.k_policy is None else self.k_policy.choose()
        k = min(wanted, self._max_new - len(out) - 1)
        t0 = time.perf_counter()
        if self.tree_width > 1 and k >= 1:
            candidates = self.drafter.propose_candidates(text, k, self.tree_width)
            draft_s = time.perf_counter() - t0
            paths = self._checked_candidates(candidates, k)
            if paths:
                return self._tree_step(paths, draft_s)
            proposal = Proposal(())
        else:
            proposal = self.drafter.propose(text, k) if k >= 1 else Proposal(())
            draft_s = time.perf_counter() - t0
        drafts, q = self._checked(proposal, k)
        pending = [out[-1]] if out else []
        runner.append_tokens(_SEQ, pending + drafts)
        t1 = time.perf_counter()
        logits = runner.step([_SEQ], logits=[len(drafts) + 1])
        forward_s = time.perf_counter() - t1
        query = runner.last_metadata.query_lens[0]
        if runner.keep_hidden:  # the tokens just run, from their first position, and features
            first = runner.blocks.num_tokens(_SEQ) - query
            self.drafter.observe_target(first, runner.token_ids(_SEQ)[first:],
                                        runner.last_hidden)
        verdict = self._verify(logits, drafts, q)
        tokens, fates = list(verdict.token_ids), list(verdict.fates)
        p_dist = (torch.softmax(logits.float().cpu(), dim=-1) if self.settings.greedy
                  else filtered_probs(logits, self.settings))
        p = [float(p_dist[i, t]) for i, t in enumerate(tokens)]
        q_of = [(1.0 if q is None else float(q[i, t])) if f is TokenFate.ACCEPTED else None
                for i, (t, f) in enumerate(zip(tokens, fates, strict=True))]
        tokens, fates, p, q_of, reason = self._cut(tokens, fates, p, q_of)
        out.extend(tokens)
        if reason is None:
            runner.truncate(_SEQ, len(self.prompt) + len(out) - 1)
        else:
            runner.free(_SEQ)
            self.finish_reason = reason
        record = SpeculativeStep(
            index=len(self.steps), drafted=tuple(drafts), accepted=verdict.accepted,
            token_ids=tuple(tokens), fates=tuple(fates), p=tuple(p), q=tuple(q_of),
            target_tokens=query, target_forward_s=forward_s, draft_s=draft_s,
            finish_reason=reason)
        self.steps.append(record)
        if self.k_policy is not None:
            self.k_policy.observe(len(drafts), verdict.n_accepted, query, forward_s, draft_s)
        return record

    def _tree_step(self, paths: list[tuple[int, ...]], draft_s: float) -> SpeculativeStep:
        """Verify the candidates `paths` as one token tree in one target forward; keep the
        accepted path in the cache, in place."""
        runner, out = self.runner, self.output
        tree = TokenTree.from_paths(paths)
        pending = [out[-1]] if out else []
        runner.append_tokens(_SEQ, pending + list(tree.tokens))
        n_pending = runner.pending(_SEQ) - len(tree)  # the whole prompt on the first step
        base = runner.blocks.num_tokens(_SEQ) - len(tree)
        start = base - n_pending
        positions, mask = tree_attention(tree, start, n_pending)
        t1 = time.perf_counter()
        logits = runner.forward_masked(_SEQ, start, positions, mask, logits=len(tree) + 1)
        forward_s = time.perf_counter() - t1
        verdict = verify_tree(tree, logits, self.settings, generator=self.generator)
        n_acc = verdict.n_accepted
        if runner.keep_hidden:  # the pending tokens' and the accepted path's features
            kept = list(range(n_pending)) + [n_pending + node for node in verdict.path]
            ran = runner.token_ids(_SEQ)[start:base]
            self.drafter.observe_target(start, ran + [tree.tokens[n] for n in verdict.path],
                                        runner.last_hidden[kept])
        path_tokens = verdict.token_ids[:n_acc]
        chosen = next(c for c in paths if c[:n_acc] == path_tokens)
        rows = [0] + [node + 1 for node in verdict.path]  # p before each emitted token
        p_dist = (torch.softmax(logits.float().cpu(), dim=-1) if self.settings.greedy
                  else filtered_probs(logits, self.settings))
        tokens, fates = list(verdict.token_ids), list(verdict.fates)
        p = [float(p_dist[r, t]) for r, t in zip(rows, tokens, strict=True)]
        q_of: list[float | None] = [1.0] * n_acc + [None]
        tokens, fates, p, q_of, reason = self._cut(tokens, fates, p, q_of)
        out.extend(tokens)
        if reason is None:
            runner.compact(_SEQ, base, [base + node for node in verdict.path])
        else:
            runner.free(_SEQ)
            self.finish_reason = reason
        record = SpeculativeStep(
            index=len(self.steps), drafted=chosen,
            accepted=(True,) * n_acc + (False,) * (len(chosen) - n_acc),
            token_ids=tuple(tokens), fates=tuple(fates), p=tuple(p), q=tuple(q_of),
            target_tokens=n_pending + len(tree), target_forward_s=forward_s, draft_s=draft_s,
            finish_reason=reason, tree_tokens=tree.tokens, tree_parents=tree.parents,
            tree_path=verdict.path)
        self.steps.append(record)
        return record

    def _cut(self, tokens: list, fates: list, p: list, q_of: list):
        """The emitted lists cut before a stop token or at the length limit, and the reason."""
        reason = None
        for i, t in enumerate(tokens):
            if t in self._stops:
                tokens, fates, p, q_of, reason = tokens[:i], fates[:i], p[:i], q_of[:i], "stop"
                break
        room = self._max_new - len(self.output)
        if len(tokens) >= room:
            tokens, fates, p, q_of = tokens[:room], fates[:room], p[:room], q_of[:room]
            reason = reason or "length"
        return tokens, fates, p, q_of, reason

    def result(self) -> SpeculativeRun:
        return SpeculativeRun(tuple(self.prompt), tuple(self.output), self.finish_reason or "",
                              self.k, self.drafter_name, tuple(self.steps),
                              tree_width=self.tree_width)

    def close(self) -> None:
        """Drop the current prompt's cache (a finished run has already freed its sequence)."""
        self.runner = None

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int,
                 stop_token_ids: Sequence[int] = ()) -> SpeculativeRun:
        """Decode `prompt_ids` to the end: `start`, then `step` until done."""
        t0 = time.perf_counter()
        self.start(prompt_ids, max_new_tokens, stop_token_ids)
        while not self.done:
            self.step()
        run = self.result()
        self.close()
        return SpeculativeRun(run.prompt_token_ids, run.token_ids, run.finish_reason, run.k,
                              run.drafter, run.steps, time.perf_counter() - t0,
                              self.tree_width)

    # ---- pieces ---------------------------------------------------------------------------------

    def _prompt(self, prompt_ids: Sequence[int]) -> list[int]:
        if isinstance(prompt_ids, torch.Tensor):
            prompt_ids = prompt_ids.tolist()
        prompt = [_token(t, "prompt_ids") for t in prompt_ids]
        if not prompt:
            raise SpeculativeError("prompt_ids must not be empty: there is nothing to continue")
        vocab = self.target.config.vocab_size
        for t in prompt:
            if not 0 <= t < vocab:
                raise SpeculativeError(f"prompt_ids holds token id {t}, outside the target's "
                                       f"vocabulary [0, {vocab})")
        return prompt

    def _checked(self, proposal: Proposal, k: int) -> tuple[list[int], torch.Tensor | None]:
        drafts = [int(t) for t in proposal.tokens]
        if len(drafts) > max(k, 0):
            raise SpeculativeError(f"drafter {self.drafter_name} proposed {len(drafts)} tokens, "
                                   f"more than the {k} asked for")
        vocab = self.target.config.vocab_size
        if any(not 0 <= t < vocab for t in drafts):
            raise SpeculativeError(f"drafter {self.drafter_name} proposed a token outside the "
                                   f"vocabulary [0, {vocab})")
        q = proposal.q_probs
        if q is not None and tuple(q.shape) != (len(drafts), vocab):
            raise SpeculativeError(f"drafter {self.drafter_name}: q_probs must have shape "
                                   f"{(len(drafts), vocab)}, got {tuple(q.shape)}")
        return drafts, q

    def _checked_candidates(self, candidates, k: int) -> list[tuple[int, ...]]:
        """The candidates' token tuples (empty ones dropped), checked as `_checked` checks one
        proposal; a tree's candidates must be certain (q one-hot, as prompt lookup's)."""
        if len(candidates) > self.tree_width:
            raise SpeculativeError(f"drafter {self.drafter_name} proposed {len(candidates)} "
                                   f"candidates, more than tree_width {self.tree_width}")
        paths = []
        for c in candidates:
            if c.q_probs is not None:
                raise SpeculativeError(f"drafter {self.drafter_name}: tree candidates must be "
                                       "certain (q_probs None), as prompt lookup's are")
            drafts, _ = self._checked(c, k)
            if drafts:
                paths.append(tuple(drafts))
        return paths

    def _verify(self, logits: torch.Tensor, drafts: list[int],
                q: torch.Tensor | None) -> Verification:
        settings = self.settings
        if drafts:
            return verify_drafts(logits, drafts, settings,
                                 draft_probs=None if settings.greedy else q,
                                 generator=self.generator)
        if settings.greedy:
            token = int(logits[0].argmax())
            uniforms: tuple[float, ...] = ()
        else:
            u = torch.rand(1, generator=self.generator, dtype=torch.float64)
            token = int(mass.draw(filtered_probs(logits, settings).double()[0], u[0]))
            uniforms = (float(u[0]),)
        return Verification((token,), 0, (), (TokenFate.BONUS,), uniforms)


def _token(value: object, name: str) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise SpeculativeError(f"{name} holds {value!r}, not a token id") from None
