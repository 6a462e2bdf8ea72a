"""A `SpeculativeStep` as a snapshot dict and back: `step_to_dict`, and `step_from_dict`
read strictly (ValueError naming the field; a tree step's `tree_tokens`, `tree_parents` and
`tree_path` checked as a tree)."""

from __future__ import annotations

from inferlab.engines.labs.speculative.settings import MAX_K, MAX_TREE_WIDTH
from inferlab.engines.settings import Setting
from inferlab.engines.speculative.decoder import SpeculativeStep
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.verification import TokenFate
from inferlab.engines.trace.snapshot import section_field


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


def _tree_fields(d: dict, where: str, vocab: int, drafted: list[int], n_accepted: int
                 ) -> dict:
    """A tree step's three fields, strictly: a valid tree whose path runs down from the
    root, its tokens the accepted drafts, `drafted` a path of the tree from the root."""
    from inferlab.engines.speculative.tree import ROOT, TokenTree

    if not any(key in d for key in TREE_KEYS):
        return {}
    tokens = [int_field(t, f"{where}.tree_tokens[{i}]", 0, vocab - 1)
              for i, t in enumerate(list_field(d, "tree_tokens", where))]
    if not 1 <= len(tokens) <= MAX_K * MAX_TREE_WIDTH:
        raise ValueError(f"{where}.tree_tokens: expected 1..{MAX_K * MAX_TREE_WIDTH} nodes, "
                         f"got {len(tokens)}")
    parents = [int_field(t, f"{where}.tree_parents[{i}]", ROOT, len(tokens))
               for i, t in enumerate(list_field(d, "tree_parents", where, len(tokens)))]
    try:
        tree = TokenTree(tuple(tokens), tuple(parents))
    except SpeculativeError as e:
        raise ValueError(f"{where}.tree_parents: {e}") from None
    path = [int_field(t, f"{where}.tree_path[{i}]", 0, len(tokens) - 1)
            for i, t in enumerate(list_field(d, "tree_path", where, n_accepted))]
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
    return {"tree_tokens": tuple(tokens), "tree_parents": tuple(parents),
            "tree_path": tuple(path)}


def int_field(value, where: str, low: int = 0, high: int = 2**31 - 1) -> int:
    """An int in low..high (the section reader reads its header with it too)."""
    return Setting("int", low, high).check(value, where)


_SECONDS = Setting("float", 0, 1e9)
_PROB = Setting("float", 0, 1)


def _seconds(value, where: str) -> float:
    return float(_SECONDS.check(value, where))


def _prob(value, where: str) -> float:
    return float(_PROB.check(value, where))


def list_field(d: dict, key: str, where: str, n: int | None = None) -> list:
    """d[key], a list (of n entries when n is given)."""
    value = section_field(d, key, where)
    if not isinstance(value, list):
        raise ValueError(f"{where}.{key}: expected a list, got {type(value).__name__}")
    if n is not None and len(value) != n:
        raise ValueError(f"{where}.{key}: expected {n} entries, got {len(value)}")
    return value


def step_from_dict(d, where: str, index: int, vocab: int) -> SpeculativeStep:
    """A step read strictly: lengths agree, acceptance is a run from the start, ids in the
    vocabulary, probabilities in 0..1."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected an object, got {type(d).__name__}")
    if int_field(section_field(d, "index", where), f"{where}.index") != index:
        raise ValueError(f"{where}.index: expected {index}, got {d['index']!r}")
    drafted = [int_field(t, f"{where}.drafted[{i}]", 0, vocab - 1)
               for i, t in enumerate(list_field(d, "drafted", where))]
    if len(drafted) > MAX_K:
        raise ValueError(f"{where}.drafted: expected at most {MAX_K} drafts, got {len(drafted)}")
    accepted = list_field(d, "accepted", where, len(drafted))
    for i, a in enumerate(accepted):
        if not isinstance(a, bool):
            raise ValueError(f"{where}.accepted[{i}]: expected true or false, got {a!r}")
        if a and i and not accepted[i - 1]:
            raise ValueError(f"{where}.accepted[{i}]: a draft accepted after a rejected one")
    tokens = [int_field(t, f"{where}.token_ids[{i}]", 0, vocab - 1)
              for i, t in enumerate(list_field(d, "token_ids", where))]
    n = len(tokens)
    if n > sum(accepted) + 1:
        raise ValueError(f"{where}.token_ids: {n} tokens, more than the {sum(accepted)} "
                         "accepted drafts + 1")
    fates = []
    for i, f in enumerate(list_field(d, "fates", where, n)):
        try:
            fates.append(TokenFate(f) if isinstance(f, str) else None)
        except ValueError:
            fates.append(None)
        if fates[-1] is None:
            raise ValueError(f"{where}.fates[{i}]: expected one of "
                             f"{', '.join(x.value for x in TokenFate)}, got {f!r}")
    p = [_prob(v, f"{where}.p[{i}]") for i, v in enumerate(list_field(d, "p", where, n))]
    q = [None if v is None else _prob(v, f"{where}.q[{i}]")
         for i, v in enumerate(list_field(d, "q", where, n))]
    reason = section_field(d, "finish_reason", where)
    if reason not in (None, "stop", "length"):
        raise ValueError(f"{where}.finish_reason: expected null, stop or length, got {reason!r}")
    tree = _tree_fields(d, where, vocab, drafted, sum(accepted))
    return SpeculativeStep(
        index=index, drafted=tuple(drafted), accepted=tuple(accepted), token_ids=tuple(tokens),
        fates=tuple(fates), p=tuple(p), q=tuple(q),
        target_tokens=int_field(section_field(d, "target_tokens", where),
                                f"{where}.target_tokens", 1),
        target_forward_s=_seconds(section_field(d, "target_forward_s", where),
                                  f"{where}.target_forward_s"),
        draft_s=_seconds(section_field(d, "draft_s", where), f"{where}.draft_s"),
        finish_reason=reason, **tree)
