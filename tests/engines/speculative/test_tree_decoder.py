"""Token trees in the loop, on the tiny model (fp32): greedy tree speculative output equals
plain greedy output token for token; the target's KV pool holds exactly the accepted tokens
after every tree step (an accepted path off the first candidate is moved into place);
sampling keeps the target's distribution in the loop; the records and their snapshot form;
bad input names `tree_width`."""

from __future__ import annotations

import pytest
import torch

from inferlab.engines.labs.speculative.records import step_from_dict, step_to_dict
from inferlab.engines.model.generate import generate
from inferlab.engines.model.tiny import tiny_model
from inferlab.engines.speculative.decoder import SpeculativeDecoder
from inferlab.engines.speculative.drafter import Proposal
from inferlab.engines.speculative.errors import SpeculativeError
from inferlab.engines.speculative.model_drafter import LayerSkipDrafter
from inferlab.engines.speculative.ngram import NgramDrafter
from inferlab.engines.speculative.sampling import SamplingSettings, filtered_probs
from inferlab.engines.speculative.verification import TokenFate
from tests.engines.speculative.chi_square import chi_square_p_value
from tests.engines.speculative.test_decoder import kv_of, recomputed_kv

PROMPTS = [list(b"the cat sat on the mat. the cat sat on the"), list(b"ab ac ad ab ac ad ab"),
           list(b"abcabcabc")]
N_NEW = 40


@pytest.fixture(scope="module")
def plain(tiny):
    return [generate(tiny[0], [p], max_new_tokens=N_NEW).generations[0].token_ids
            for p in PROMPTS]


class OracleTree:
    """Candidates around the target's own greedy continuation: a wrong token first, then one
    that follows it two tokens and turns away, then the right one; so the accepted path is
    never the first candidate's and its K/V must move."""

    name = "oracle"

    def __init__(self, text: list[int]) -> None:
        self.text = text

    def reset(self) -> None:
        pass

    def propose(self, token_ids, k):
        return self.propose_candidates(token_ids, k, 1)[0]

    def propose_candidates(self, token_ids, k, width):
        right = tuple(self.text[len(token_ids): len(token_ids) + k])
        off = tuple((t + 1) % 256 for t in right)
        out = [off[:1] + right[1:], right[:2] + off[2:], right]
        return tuple(Proposal(c) for c in out[:width] if c)


@pytest.mark.parametrize("width", [2, 3, 8])
@pytest.mark.parametrize("k", [1, 4])
def test_greedy_tree_output_is_plain_greedy_output(tiny, plain, width, k):
    decoder = SpeculativeDecoder(tiny[0], NgramDrafter(), k=k, block_size=4, tree_width=width)
    for prompt, ref in zip(PROMPTS, plain, strict=True):
        run = decoder.generate(prompt, N_NEW)
        assert run.token_ids == ref and run.tree_width == width
        assert sum(len(s.token_ids) for s in run.steps) == N_NEW
        trees = [s for s in run.steps if s.tree_tokens]
        assert trees  # the n-gram drafter found candidates
        for s in trees:
            assert len(s.tree_tokens) <= width * k and len(s.drafted) <= k
            assert s.tree.path(s.tree_path[-1]) == s.tree_path if s.tree_path else True
            assert s.token_ids[:s.n_accepted] == tuple(s.tree_tokens[i] for i in s.tree_path)
            assert s.drafted[:s.n_accepted] == s.token_ids[:s.n_accepted]


def test_an_oracle_tree_accepts_off_the_first_candidate_and_the_pool_stays_exact(tiny, plain):
    model = tiny[0]
    prompt, ref = PROMPTS[1], plain[1]
    decoder = SpeculativeDecoder(model, OracleTree(prompt + list(ref)), k=4, block_size=4,
                                 tree_width=3)
    decoder.start(prompt, N_NEW)
    while True:
        step = decoder.step()
        if step.tree_tokens:
            # every candidate verified, the right one (the last) accepted whole: its nodes
            # sit after the other candidates' and were moved into place
            assert step.tree_path[0] > 0 and step.fates[-1] is TokenFate.BONUS
            assert step.drafted == tuple(step.tree_tokens[i] for i in step.tree_path)
        if decoder.done:
            break
        text = prompt + decoder.output
        runner = decoder.runner
        assert runner.token_ids("target") == text[:-1] and runner.pending("target") == 0
        stats = runner.blocks.stats()
        assert stats.tokens_logical == stats.slots_filled == len(text) - 1
        assert stats.blocks_used == -(-(len(text) - 1) // 4)
        assert stats.blocks_free + stats.blocks_cached_free == stats.blocks_total - \
            stats.blocks_used
        torch.testing.assert_close(kv_of(runner, "target", len(text) - 1),
                                   recomputed_kv(model, text[:-1]), rtol=1e-4, atol=1e-4)
    run = decoder.result()
    assert run.token_ids == ref
    assert run.tokens_per_target_forward > 3  # 5 tokens a step but near the end


def test_the_pool_holds_exactly_the_accepted_tokens_after_every_ngram_tree_step(tiny):
    model = tiny[0]
    prompt = PROMPTS[0]
    decoder = SpeculativeDecoder(model, NgramDrafter(), k=4, block_size=4, tree_width=4)
    decoder.start(prompt, 30)
    while not decoder.done:
        decoder.step()
        if decoder.done:
            break
        text = prompt + decoder.output
        stats = decoder.runner.blocks.stats()
        assert stats.tokens_logical == stats.slots_filled == len(text) - 1
        torch.testing.assert_close(kv_of(decoder.runner, "target", len(text) - 1),
                                   recomputed_kv(model, text[:-1]), rtol=1e-4, atol=1e-4)
    assert any(len(s.tree_tokens) > len(s.drafted) for s in decoder.steps)  # real branching


def test_sampling_with_trees_keeps_the_targets_distribution_in_the_loop():
    # vocabulary of 16; the prompt's suffix "1" occurred three times, so the n-gram drafter
    # proposes three distinct top-level candidates (6.., 4.., 2..): each tried against the
    # residual of the ones before. The first emitted token must be distributed as p.
    # 1,000 trials (~5 s): this is the wiring check; the sampler's own exactness is tested
    # with 100,000 trials in test_tree.py
    model, _ = tiny_model(vocab_size=16)
    prompt = [1, 2, 3, 1, 4, 5, 1, 6, 7, 1]
    settings = SamplingSettings(temperature=2.0)
    p = filtered_probs(model.forward_nocache(torch.tensor(prompt)), settings)[0]
    decoder = SpeculativeDecoder(model, NgramDrafter(), k=2, settings=settings, seed=3,
                                 tree_width=3, block_size=4)
    first, fates = [], set()
    for _ in range(1000):
        decoder.start(prompt, 3)
        step = decoder.step()
        assert step.tree_parents.count(-1) == 3
        first.append(step.token_ids[0])
        fates.add(step.fates[0])
    assert fates == {TokenFate.ACCEPTED, TokenFate.RESAMPLED}
    p_value = chi_square_p_value(torch.tensor(first), p)
    print(f"in-loop tree, first token: p = {p_value:.4f}")
    assert p_value > 0.001


def test_a_tree_step_reads_back_from_its_dict_and_bad_trees_are_named(tiny, plain):
    prompt, ref = PROMPTS[1], plain[1]
    decoder = SpeculativeDecoder(tiny[0], OracleTree(prompt + list(ref)), k=4, tree_width=3)
    step = decoder.generate(prompt, 12).steps[0]
    d = step_to_dict(step)
    assert step_from_dict(d, "s", 0, 256) == step
    chain = SpeculativeDecoder(tiny[0], NgramDrafter(), k=4).generate(prompt, 6).steps[-1]
    assert not set(step_to_dict(chain)) & {"tree_tokens", "tree_parents", "tree_path"}
    for change, match in [
        ({"tree_parents": d["tree_parents"][:-1]}, r"s.tree_parents: expected \d+ entries"),
        ({"tree_parents": [0] + d["tree_parents"][1:]}, r"s.tree_parents: tree parents\[0\]"),
        ({"tree_path": [0] + d["tree_path"][1:]}, r"s.tree_path\[\d\]"),
        ({"tree_tokens": [256] + d["tree_tokens"][1:]}, r"s.tree_tokens\[0\]"),
        ({"drafted": [d["drafted"][0] ^ 1] + d["drafted"][1:]}, r"s.drafted\[0\]"),
    ]:
        bad = dict(d) | change
        with pytest.raises(ValueError, match=match):
            step_from_dict(bad, "s", 0, 256)
    missing = dict(d)
    del missing["tree_path"]
    with pytest.raises(ValueError, match="s.*tree_path"):
        step_from_dict(missing, "s", 0, 256)


@pytest.mark.parametrize("width, match", [(0, "tree_width must be an integer >= 1, got 0"),
                                          (1.5, "tree_width must be an integer >= 1"),
                                          (True, "tree_width must be an integer >= 1")])
def test_a_bad_tree_width_is_named(tiny, width, match):
    with pytest.raises(SpeculativeError, match=match):
        SpeculativeDecoder(tiny[0], NgramDrafter(), tree_width=width)


def test_a_drafter_without_candidates_cannot_build_trees(tiny):
    with pytest.raises(SpeculativeError, match="tree_width 2: drafter layerskip:1 proposes one"):
        SpeculativeDecoder(tiny[0], LayerSkipDrafter(tiny[0], 1), tree_width=2)
