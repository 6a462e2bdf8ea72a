"""Every execution's output equals torch SDPA (fp32, 1e-5), on random shapes with ragged last
tiles and causal masks; the stepped tiled engine ends where the one-shot loop does."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.attention.executions import make_engine, sdpa_reference
from inferlab.engines.attention.split_k import split_k_decode
from inferlab.engines.attention.step import EXECUTIONS, NAIVE, SPLIT_K, TILED
from inferlab.engines.attention.tiled import flash_attention

SHAPES = [  # (heads, N, d, Br, Bc): ragged last tiles in rows, keys or both
    (1, 1, 8, 4, 4), (1, 16, 8, 4, 4), (2, 37, 16, 8, 5), (3, 50, 24, 16, 7),
    (1, 64, 64, 64, 64), (2, 65, 32, 64, 13), (1, 33, 4, 1, 32), (1, 20, 8, 32, 3),
]


def qkv(heads, n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(heads, n, d, generator=g) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("execution", EXECUTIONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_output_equals_sdpa(execution, shape, causal):
    heads, n, d, br, bc = shape
    q, k, v = qkv(heads, n, d, seed=n * 31 + d)
    engine = make_engine(execution, q, k, v, br, bc, causal)
    engine.run()
    torch.testing.assert_close(engine.output, sdpa_reference(execution, q, k, v, causal),
                               rtol=0, atol=1e-5)


def test_large_scores_do_not_overflow():
    """The running max keeps exp() finite where a plain softmax of the raw scores overflows."""
    q, k, v = qkv(1, 40, 16, seed=3)
    q = q * 60.0
    for execution in EXECUTIONS:
        engine = make_engine(execution, q, k, v, 8, 6, True)
        engine.run()
        ref = sdpa_reference(execution, q, k, v, True)
        assert torch.isfinite(engine.output).all()
        torch.testing.assert_close(engine.output, ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_stepped_tiled_ends_where_the_one_shot_loop_does(causal):
    q, k, v = qkv(2, 45, 16, seed=7)
    engine = make_engine(TILED, q, k, v, 8, 6, causal)
    engine.run()
    o, m, ell = flash_attention(q, k, v, 8, 6, causal)
    for stepped, shot in ((engine.output, o), (engine.m, m), (engine.ell, ell)):
        torch.testing.assert_close(stepped, shot, rtol=1e-6, atol=1e-6)


def test_stepped_split_k_ends_where_the_one_shot_decode_does():
    q, k, v = qkv(3, 50, 16, seed=9)
    engine = make_engine(SPLIT_K, q, k, v, 4, 7)
    engine.run()
    torch.testing.assert_close(engine.output, split_k_decode(q[:, -1], k, v, 7),
                               rtol=1e-6, atol=1e-6)


def test_tiled_m_and_l_are_the_rows_softmax_statistics():
    """After the last tile m is each row's max score and ℓ its sum of e^(s - m)."""
    q, k, v = qkv(1, 30, 8, seed=11)
    engine = make_engine(TILED, q, k, v, 7, 4, True)
    engine.run()
    s = (q[0] @ k[0].T) * 8 ** -0.5
    s = s.masked_fill(torch.ones(30, 30, dtype=torch.bool).triu(1), float("-inf"))
    m = s.amax(-1)
    torch.testing.assert_close(engine.m[0], m, rtol=0, atol=1e-6)
    torch.testing.assert_close(engine.ell[0], torch.exp(s - m[:, None]).sum(-1), rtol=1e-6,
                               atol=1e-6)


def test_causal_skips_tiles_above_the_diagonal():
    q, k, v = qkv(1, 32, 8, seed=1)
    full = make_engine(TILED, q, k, v, 8, 8, False)
    causal = make_engine(TILED, q, k, v, 8, 8, True)
    assert full.steps_total == 16 and causal.steps_total == 4 + 3 + 2 + 1
    seen = []
    while not causal.done:
        rec = causal.step()
        seen.append((rec.q_rows, rec.k_rows))
    assert all(c0 < r1 for (_r0, r1), (c0, _c1) in seen)


def test_steps_hand_out_the_tiles_in_flashattention2_order():
    q, k, v = qkv(1, 10, 4, seed=2)
    engine = make_engine(TILED, q, k, v, 4, 3)
    tiles = []
    while not engine.done:
        rec = engine.step()
        tiles.append((rec.q_rows, rec.k_rows))
        assert rec.score_tile.shape == (rec.q_rows[1] - rec.q_rows[0],
                                        rec.k_rows[1] - rec.k_rows[0])
    assert tiles == [((r0, min(10, r0 + 4)), (c0, min(10, c0 + 3)))
                     for r0 in (0, 4, 8) for c0 in (0, 3, 6, 9)]
    assert rec.done and engine.done
    with pytest.raises(RuntimeError):
        engine.step()


def test_naive_materialises_the_softmax_of_the_scores():
    q, k, v = qkv(1, 12, 4, seed=5)
    engine = make_engine(NAIVE, q, k, v, 5, 5, True)
    phases = []
    while not engine.done:
        phases.append(engine.step().phase)
    assert phases == ["scores"] * 9 + ["softmax"] * 3 + ["output"] * 9  # 3×3 tiles, 3 rows
    ref = torch.softmax((q[0] @ k[0].T * 0.5).masked_fill(
        torch.ones(12, 12, dtype=torch.bool).triu(1), float("-inf")), -1)
    torch.testing.assert_close(engine.probs[0], ref, rtol=0, atol=1e-6)


def test_bad_inputs_are_refused():
    q, k, v = qkv(1, 8, 4, seed=0)
    with pytest.raises(ValueError, match="tile sizes"):
        make_engine(TILED, q, k, v, 0, 4)
    with pytest.raises(ValueError, match="one shape"):
        make_engine(TILED, q, k[:, :4], v, 4, 4)
    with pytest.raises(ValueError, match="float32"):
        make_engine(NAIVE, q.double(), k.double(), v.double(), 4, 4)
    with pytest.raises(ValueError, match="unknown execution"):
        make_engine("flash3", q, k, v, 4, 4)


def test_a_step_leaves_torchs_thread_count_as_it_found_it():
    before = torch.get_num_threads()
    engine = make_engine(TILED, *qkv(1, 16, 4, seed=0), 8, 8)
    engine.step()
    assert torch.get_num_threads() == before
