"""Token trees: the parent-index representation, hand-worked verification (sampling and
greedy), the vectorised sampler against the node-by-node reference, and exactness in
distribution for both kinds of candidates (i.i.d. from one q; distinct, each certain)."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.sampling import GREEDY, SamplingSettings, filtered_probs
from inferlab.engines.speculative.tree import ROOT, TokenTree
from inferlab.engines.speculative.tree_rejection import (
    greedy_tree_verify,
    tree_rejection_sample,
    tree_rejection_sample_batch,
    verify_tree,
)
from inferlab.engines.speculative.verification import TokenFate
from tests.engines.speculative.chi_square import chi_square_p_value
from tests.engines.speculative.reference import reference_tree_rejection_sample
from tests.engines.speculative.trials import draw_rows

A, R, B = TokenFate.ACCEPTED, TokenFate.RESAMPLED, TokenFate.BONUS
P_MIN = 0.001


def test_from_paths_builds_the_trie_in_first_appearance_order():
    tree = TokenTree.from_paths([[3, 2], [3, 1, 4], [5]])
    assert tree.tokens == (3, 2, 1, 4, 5)
    assert tree.parents == (-1, 0, 0, 2, -1)
    assert tree.children(ROOT) == (0, 4)
    assert tree.children(0) == (1, 2)
    assert tree.path(3) == (0, 2, 3) and tree.path(ROOT) == ()
    assert tree.depth() == 3 and len(tree) == 5
    assert TokenTree.chain([7, 8, 9]) == TokenTree((7, 8, 9), (-1, 0, 1))


@pytest.mark.parametrize("tokens, parents, match", [
    ((1, 2), (-1,), "same length"),
    ((), (), "at least one node"),
    ((1, 2), (-1, 1), r"parents\[1\]"),  # its own parent
    ((1, 2), (-1, -2), r"parents\[1\]"),
    ((1, -3), (-1, 0), r"tokens\[1\]"),
])
def test_malformed_trees_are_refused(tokens, parents, match):
    with pytest.raises(SpeculativeError, match=match):
        TokenTree(tokens, parents)


# tree: node 0 = token 2 (below the root), node 1 = token 0 (below node 0), node 2 = token 1
TREE = TokenTree.from_paths([[2, 0], [1]])
ROWS = torch.tensor([[0.1, 0.3, 0.4, 0.2],    # after the root
                     [0.5, 0.5, 0.0, 0.0],    # after node 0
                     [0.25, 0.25, 0.25, 0.25],  # after node 1
                     [0.6, 0.2, 0.1, 0.1]])   # after node 2


def test_a_rejected_candidate_leaves_its_residual_to_the_next_sibling():
    # node 0 (token 2, certain): 0.5 is not < 0.4, rejected; r = p without token 2 =
    # (.1, .3, 0, .2) / .6, so node 2 (token 1) is kept when u < 0.5: 0.4 keeps it. Node 2 is
    # a leaf: the bonus from its row, cumulative (.6, .8, .9, 1) exceeds 0.7 at token 1
    v = tree_rejection_sample(TREE, ROWS, None, uniforms=[0.5, 0.0, 0.4, 0.7])
    assert v.path == (2,) and v.token_ids == (1, 1) and v.fates == (A, B)
    assert v.accepted == (False, False, True) and v.n_accepted == 1


def test_the_last_candidate_rejected_resamples_from_the_residual():
    # node 0 kept (0.3 < 0.4); its child node 1 (token 0): 0.6 is not < 0.5, rejected; the
    # residual of (.5, .5, 0, 0) without token 0 is token 1, whatever u
    v = tree_rejection_sample(TREE, ROWS, None, uniforms=[0.3, 0.6, 0.0, 0.99])
    assert v.path == (0,) and v.token_ids == (2, 1) and v.fates == (A, R)


def test_greedy_follows_the_target_argmax_down_the_tree():
    tree = TokenTree.from_paths([[3, 2], [3, 1, 4], [5]])  # nodes: 3, 2, 1, 4, 5
    best = [3, 1, 0, 4, 7, 0]  # the argmax after the root and after each node
    scores = torch.nn.functional.one_hot(torch.tensor(best), 8).float()
    v = greedy_tree_verify(tree, scores)
    # node 0 (3) matches; its children: node 1 (2) does not, node 2 (1) does; then node 3 (4)
    assert v.path == (0, 2, 3) and v.token_ids == (3, 1, 4, 7) and v.fates == (A, A, A, B)
    assert verify_tree(tree, scores, GREEDY) == v
    best[3] = 6  # after node 2 the target wants 6: node 3 is refused, 6 is emitted instead
    v = greedy_tree_verify(tree, torch.nn.functional.one_hot(torch.tensor(best), 8).float())
    assert v.path == (0, 2) and v.token_ids == (3, 1, 6) and v.fates == (A, A, R)
    best[0] = 6  # no top-level candidate matches
    v = greedy_tree_verify(tree, torch.nn.functional.one_hot(torch.tensor(best), 8).float())
    assert v.path == () and v.token_ids == (6,) and v.fates == (R,)


def _random_tree(g: torch.Generator) -> TokenTree:
    n = int(torch.randint(1, 10, (1,), generator=g))
    parents = [int(torch.randint(-1, i, (1,), generator=g)) for i in range(n)]
    return TokenTree(tuple([0] * n), tuple(parents))


def test_vectorised_tree_sampler_equals_the_reference_on_the_same_uniforms():
    g = torch.Generator().manual_seed(21)
    fates = set()
    for _ in range(300):
        shape = _random_tree(g)
        n, vocab = len(shape), int(torch.randint(2, 12, (1,), generator=g))
        settings = SamplingSettings(top_k=int(torch.randint(0, vocab + 1, (1,), generator=g)))
        p = filtered_probs(torch.randn(n + 1, vocab, generator=g) * 2, settings)
        q = filtered_probs(torch.randn(n, vocab, generator=g), settings)
        tokens = torch.multinomial(q, 1, generator=g)[:, 0].tolist()
        tree = TokenTree(tuple(tokens), shape.parents)
        u = torch.rand(n + 1, generator=g, dtype=torch.float64)
        one_hot = bool(torch.rand(1, generator=g) < 0.3)
        v = tree_rejection_sample(tree, p, None if one_hot else q, uniforms=u)
        q_rows = torch.nn.functional.one_hot(torch.tensor(tokens), vocab).double() if one_hot \
            else q.double()
        path, last, resampled = reference_tree_rejection_sample(
            list(tree.parents), tokens, p.double().tolist(), q_rows.tolist(), u.tolist())
        assert v.path == tuple(path)
        assert v.token_ids[-1] == last
        assert v.fates[-1] == (R if resampled else B)
        fates.add(v.fates[-1])
    assert fates == {R, B}


# Exactness. Target and draft over three tokens: row tables p1 [V], p2 [V, V] (p2[a] = the
# distribution after a), p3 [V, V] after the second token.
def _tables(seed: int, vocab: int, settings: SamplingSettings):
    g = torch.Generator().manual_seed(seed)
    target = [torch.randn(vocab, generator=g) * 1.2, torch.randn(vocab, vocab, generator=g) * 1.2,
              torch.randn(vocab, vocab, generator=g)]
    draft = [t + torch.randn(t.shape, generator=g) * 0.8 for t in target]
    return ([filtered_probs(t, settings) for t in target],
            [filtered_probs(t, settings) for t in draft])


def _rows(parents, tokens: torch.Tensor, tables) -> torch.Tensor:
    """[B, N+1, V]: row 0 from tables[0], row i+1 after node i from the table of its depth."""
    p1, p2, p3 = tables
    depth = [0] * len(parents)
    for i, parent in enumerate(parents):
        depth[i] = 1 if parent == ROOT else depth[parent] + 1
    rows = [p1.expand(tokens.shape[0], -1)]
    for i in range(len(parents)):
        rows.append((p2 if depth[i] == 1 else p3)[tokens[:, i]])
    return torch.stack(rows, dim=1)


def _second_tokens(first: torch.Tensor, p, q, g) -> torch.Tensor:
    """After an emitted `first` token, a one-draft step continues: its emitted token."""
    from inferlab.engines.speculative.rejection import rejection_sample_batch

    (_, p2, p3), (_, q2, _) = p, q
    z = draw_rows(q2[first], g)
    step = rejection_sample_batch(torch.stack([p2[first], p3[z]], dim=1), q2[first][:, None],
                                  z[:, None], torch.rand(first.shape[0], 2, generator=g,
                                                         dtype=torch.float64))
    return step.tokens[:, 0]


def _check_first_two_tokens(parents, tokens, p, q_rows, tables_p, tables_q, g, label):
    n_trials, n = tokens.shape
    vocab = tables_p[0].shape[0]
    out = tree_rejection_sample_batch(parents, tokens, p, q_rows,
                                      torch.rand(n_trials, n + 1, generator=g,
                                                 dtype=torch.float64))
    depth = out.accepted.sum(dim=1)
    path_tokens = torch.where(out.accepted, tokens, -1)
    # the emitted sequence: the accepted nodes in order (parents first), then `last`
    emitted = torch.full((n_trials, 3), -1, dtype=torch.int64)
    order = torch.cumsum(out.accepted.long(), dim=1) - 1
    for i in range(n):
        on = out.accepted[:, i]
        emitted[on, order[on, i]] = path_tokens[on, i]
    emitted[torch.arange(n_trials), depth] = out.last
    first, second = emitted[:, 0], emitted[:, 1].clone()
    short = depth == 0
    second[short] = _second_tokens(first[short], tables_p, tables_q, g)
    p1, p2, _ = tables_p
    p_first = chi_square_p_value(first, p1)
    p_joint = chi_square_p_value(first * vocab + second, (p1[:, None] * p2).flatten())
    print(f"tree {label}: first token p = {p_first:.4f}, joint p = {p_joint:.4f}")
    assert p_first > P_MIN and p_joint > P_MIN
    return out


@pytest.mark.parametrize("settings", [SamplingSettings(),
                                      SamplingSettings(temperature=1.2, top_k=7, top_p=0.9)],
                         ids=["plain", "T1.2-k7-p0.9"])
@pytest.mark.parametrize("seed", [0, 1])
def test_iid_candidates_tree_is_exact_in_distribution(settings, seed):
    # SpecInfer: three top-level candidates drawn i.i.d. from q1, two below each drawn i.i.d.
    # from q2(. | their parent)
    vocab, n_trials = 10, 100_000
    parents = (-1, 0, 0, -1, 3, 3, -1, 6, 6)
    tables_p, tables_q = _tables(seed, vocab, settings)
    q1, q2, _ = tables_q
    g = torch.Generator().manual_seed(400 + seed)
    tokens = torch.zeros(n_trials, len(parents), dtype=torch.int64)
    q_rows = torch.zeros(n_trials, len(parents), vocab)
    for i, parent in enumerate(parents):
        q_rows[:, i] = q1 if parent == ROOT else q2[tokens[:, parent]]
        tokens[:, i] = draw_rows(q_rows[:, i], g)
    out = _check_first_two_tokens(parents, tokens, _rows(parents, tokens, tables_p), q_rows,
                                  tables_p, tables_q, g, f"iid {settings} seed {seed}")
    assert bool(out.resampled.any()) and bool((out.accepted.sum(1) == 2).any())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distinct_certain_candidates_tree_is_exact_in_distribution(seed):
    # prompt-lookup style: fixed distinct candidates, each certain (q one-hot)
    vocab, n_trials = 10, 100_000
    settings = SamplingSettings(temperature=0.9, top_p=0.95)
    tables_p, tables_q = _tables(10 + seed, vocab, settings)
    p1 = tables_p[0]
    top = p1.argsort(descending=True).tolist()
    tree = TokenTree.from_paths([[top[0], 3], [top[0], 5], [top[1], 2], [top[3]]])
    tokens = torch.tensor(tree.tokens).expand(n_trials, -1)
    q_rows = torch.nn.functional.one_hot(tokens, vocab).float()
    g = torch.Generator().manual_seed(500 + seed)
    _check_first_two_tokens(tree.parents, tokens, _rows(tree.parents, tokens, tables_p), q_rows,
                            tables_p, tables_q, g, f"distinct seed {seed}")


def test_the_test_catches_siblings_tried_without_the_residual_update():
    # the power check: trying every i.i.d. sibling against p itself (no residual update
    # between siblings) over-weights what the draft favours; the same test must reject it
    vocab, n_trials, width = 10, 100_000, 3
    (p1, _, _), (q1, _, _) = _tables(0, vocab, SamplingSettings())
    g = torch.Generator().manual_seed(600)
    drafts = draw_rows(q1.expand(n_trials, width, vocab), g)
    u = torch.rand(n_trials, width + 1, generator=g, dtype=torch.float64)
    emitted = torch.full((n_trials,), -1, dtype=torch.int64)
    for i in range(width):
        take = (emitted < 0) & (u[:, i] * q1[drafts[:, i]] < p1[drafts[:, i]])
        emitted[take] = drafts[take, i]
    left = emitted < 0
    residual = (p1 - q1).clamp(min=0)
    emitted[left] = draw_rows(residual.expand(int(left.sum()), vocab), g)
    assert chi_square_p_value(emitted, p1) < 1e-6
    # the real sampler on the same drafts passes
    out = tree_rejection_sample_batch((-1,) * width, drafts, p1.expand(n_trials, width + 1, vocab),
                                      q1.expand(n_trials, width, vocab), u)
    first = torch.where(out.accepted.any(1), (drafts * out.accepted).sum(1), out.last)
    assert chi_square_p_value(first, p1) > P_MIN
