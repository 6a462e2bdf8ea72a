"""The speculative lab's records: `SpeculativeHeader` (what is drawn beside a run's steps),
`SpeculativeSnapshot` (a snapshot section as read), and a `SpeculativeStep` as a snapshot dict
and back: `step_to_dict`, and `step_from_dict` read strictly (ValueError naming the field; a
tree step's `tree_tokens`, `tree_parents` and `tree_path` checked as a tree)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from inferlab.engines.fields import (
    Setting,
    as_tuple,
    or_none,
    read_fields,
    read_float,
    read_floats,
    read_list,
    read_probability,
)
from inferlab.engines.labs.speculative.settings import MAX_K, MAX_TREE_WIDTH
from inferlab.engines.labs.speculative.sweep_records import KSweep
from inferlab.engines.speculative.decoder import SpeculativeStep
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.tree import ROOT, TokenTree
from inferlab.engines.speculative.verification import TokenFate
from inferlab.engines.trace.snapshot import section_field


@dataclass(frozen=True)
class SpeculativeHeader:
    """What is drawn beside a run's steps: the run's identity and the text of its tokens."""

    model: str
    drafter: str
    k: int
    prompt_token_ids: tuple[int, ...]
    token_texts: dict[int, str] = field(repr=False)
    """id -> text of every token the run saw (prompt, emitted, drafted)."""
    n_layers: int = 0  # the target's (drafter menus)
    tree_width: int = 1
    head_accept_by_position: tuple[float, ...] = ()
    """A trained head's held-out P(draft j accepted | the drafts before it accepted), j =
    1, 2, … (its file's last curve point; engines.speculative.heads.evaluate); empty for
    other drafters and heads that did not record it."""

    def text(self, token_id: int) -> str:
        return self.token_texts.get(token_id, f"<{token_id}>")


@dataclass(frozen=True)
class SpeculativeSnapshot:
    """A speculative lab snapshot section as read (`read_speculative_section`): what the
    window replays, a comparison plots and a report's formulas substitute."""

    settings: dict
    """The lab's settings, checked (engines/labs/speculative/settings.py)."""
    header: SpeculativeHeader | None
    """None: the lab had not run when the snapshot was taken (no steps, no metrics)."""
    steps: tuple[SpeculativeStep, ...]
    metrics: dict
    """The run's statistics, recomputed from the steps read (metrics.py), not the file's."""
    sweep: KSweep | None = None
    """The K sweep the lab ran, or None."""


def step_to_dict(s: SpeculativeStep) -> dict:
    d = {"index": s.index, "drafted": list(s.drafted), "accepted": list(s.accepted),
         "token_ids": list(s.token_ids), "fates": [f.value for f in s.fates],
         "p": list(s.p), "q": list(s.q), "target_tokens": s.target_tokens,
         "target_forward_s": s.target_forward_s, "draft_s": s.draft_s,
         "finish_reason": s.finish_reason}
    if s.tree_tokens:  # a tree step; a chain step's dict is as it always was
        d |= {"tree_tokens": list(s.tree_tokens), "tree_parents": list(s.tree_parents),
              "tree_path": list(s.tree_path)}
    return d


TREE_KEYS = ("tree_tokens", "tree_parents", "tree_path")


def _tree_fields(d: dict, where: str, vocab: int, drafted: tuple[int, ...], n_accepted: int
                 ) -> dict:
    """A tree step's three fields, strictly: a valid tree whose path runs down from the
    root, its tokens the accepted drafts, `drafted` a path of the tree from the root."""
    if not any(key in d for key in TREE_KEYS):
        return {}

    def ids(key: str, low: int, high: int, n: int | None = None) -> tuple[int, ...]:
        value = Setting("int-list", low, high)(section_field(d, key, where), f"{where}.{key}")
        if n is not None and len(value) != n:
            raise ValueError(f"{where}.{key}: expected {n} entries, got {len(value)}")
        return tuple(value)

    tokens = ids("tree_tokens", 0, vocab - 1)
    if not 1 <= len(tokens) <= MAX_K * MAX_TREE_WIDTH:
        raise ValueError(f"{where}.tree_tokens: expected 1..{MAX_K * MAX_TREE_WIDTH} nodes, "
                         f"got {len(tokens)}")
    parents = ids("tree_parents", ROOT, len(tokens), len(tokens))
    try:
        tree = TokenTree(tokens, parents)
    except SpeculativeError as e:
        raise ValueError(f"{where}.tree_parents: {e}") from None
    path = ids("tree_path", 0, len(tokens) - 1, n_accepted)
    for j, node in enumerate(path):
        if parents[node] != (path[j - 1] if j else ROOT):
            raise ValueError(f"{where}.tree_path[{j}]: node {node} does not hang below the "
                             "node before it")
    node = ROOT
    for j, t in enumerate(drafted):
        node = next((i for i in tree.children(node) if tokens[i] == t), None)
        if node is None:
            raise ValueError(f"{where}.drafted[{j}]: the drafts are not a path of the tree")
        if j < n_accepted and node != path[j]:
            raise ValueError(f"{where}.tree_path[{j}]: not the accepted draft's node")
    return {"tree_tokens": tokens, "tree_parents": parents, "tree_path": path}


_BOOL = Setting("bool")
_FATE = Setting("str", choices=tuple(f.value for f in TokenFate))
_SECONDS = partial(read_float, low=0.0, high=1e9)  # a step's time (past 1e9 s: not a run)
_STEP_FIELDS = {
    "index": Setting("int", 0, 2**31 - 1),
    "accepted": as_tuple(lambda v, w: read_list(v, _BOOL, w)),
    "fates": as_tuple(lambda v, w: read_list(v, _FATE, w)),
    "p": partial(read_floats, low=0.0, high=1.0),
    "q": as_tuple(lambda v, w: read_list(v, or_none(read_probability), w)),
    "target_tokens": Setting("int", 1, 2**31 - 1),
    "target_forward_s": _SECONDS, "draft_s": _SECONDS,
    "finish_reason": Setting("str", choices=("stop", "length"), none=True)}


def step_from_dict(d, where: str, index: int, vocab: int) -> SpeculativeStep:
    """A step read strictly: lengths agree, acceptance is a run from the start, ids in the
    vocabulary, probabilities in 0..1."""
    token_ids = as_tuple(Setting("int-list", 0, vocab - 1))
    f = read_fields(d, _STEP_FIELDS | {"drafted": token_ids, "token_ids": token_ids}, where)
    if f["index"] != index:
        raise ValueError(f"{where}.index: expected {index}, got {f['index']!r}")
    drafted, accepted, tokens = f["drafted"], f["accepted"], f["token_ids"]
    if len(drafted) > MAX_K:
        raise ValueError(f"{where}.drafted: expected at most {MAX_K} drafts, got {len(drafted)}")
    n = len(tokens)
    for key, length in (("accepted", len(drafted)), ("fates", n), ("p", n), ("q", n)):
        if len(f[key]) != length:
            raise ValueError(f"{where}.{key}: expected {length} entries, got {len(f[key])}")
    for i, a in enumerate(accepted):
        if a and i and not accepted[i - 1]:
            raise ValueError(f"{where}.accepted[{i}]: a draft accepted after a rejected one")
    if n > sum(accepted) + 1:
        raise ValueError(f"{where}.token_ids: {n} tokens, more than the {sum(accepted)} "
                         "accepted drafts + 1")
    tree = _tree_fields(d, where, vocab, drafted, sum(accepted))
    return SpeculativeStep(**(f | {"fates": tuple(map(TokenFate, f["fates"]))}), **tree)
