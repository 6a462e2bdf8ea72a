"""One block table per layer group (engines/kv/group_coordinator): a sliding group drops the
blocks behind its window, holding at most ⌈W / block_size⌉ + 1 per sequence past it, while
the tokens and logits stay those of a cache that keeps every block; the bytes held against
keeping everything come from one formula (engines/roofline/kv_held)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.engines.kv.attention_metadata import GroupedMetadata, build_attention_metadata
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.kv.errors import KVOutOfMemoryError
from inferlab.engines.kv.free_queue import NULL_BLOCK
from inferlab.engines.kv.group_coordinator import KVCacheCoordinator
from inferlab.engines.kv.input_batch import InputBatch
from inferlab.engines.kv.kv_groups import GroupedKVCache, LayerGroup, layer_groups
from inferlab.engines.model.hf_config import model_config_from_hf
from inferlab.engines.model.runner import ModelRunner
from inferlab.engines.roofline.kv_held import kv_held
from inferlab.engines.roofline.memory import kv_bytes_per_request, kv_bytes_per_token
from inferlab.engines.serve.engine import ServingEngine
from inferlab.engines.serve.executors import ModelExecutor
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import CONTINUOUS, Scheduler

FULL, SLIDING = LayerGroup(0, (1,)), LayerGroup(4, (0, 2))


def coordinator(n_blocks=8, block_size=2, prefix_cache="none", groups=(FULL, SLIDING)):
    return KVCacheCoordinator(groups, n_blocks, block_size, prefix_cache=prefix_cache,
                              bytes_per_slot=300)


# ---- the groups and the tables, block by block ------------------------------------------------


def test_layers_are_grouped_by_window_full_first_then_each_window_from_the_smallest():
    assert layer_groups([8, 0, 8, 4, 0]) == (LayerGroup(0, (1, 4)), LayerGroup(4, (3,)),
                                             LayerGroup(8, (0, 2)))
    assert layer_groups([0, 0]) == (LayerGroup(0, (0, 1)),)
    assert LayerGroup(512, (0,)).name == "sliding window 512"
    c = coordinator()
    assert c.layer_group == (1, 0, 1)
    assert [m.bytes_per_slot for m in c.managers] == [100, 200]  # split by the groups' layers


def test_a_sliding_group_drops_the_blocks_behind_its_window_as_the_sequence_advances():
    c = coordinator()
    assert c.allocate("a", [1, 2, 3, 4, 5, 6]) == 0
    assert c.group_tables("a") == ([0, 1, 2], [0, 1, 2])
    c.mark_computed("a", 6)  # the first query still to run is at 6: keys from 3 on
    assert c.group_tables("a") == ([0, 1, 2], [0, 1, 2])  # the reservation started at 0
    assert c.append_each(["a"], [7]) == (1, [])  # reserving from 6: block 0 (0, 1) is behind
    assert c.group_tables("a") == ([0, 1, 2, 3], [NULL_BLOCK.block_id, 1, 2, 3])
    sliding = c.managers[1]
    assert sliding.free_block_ids() == [4, 5, 6, 7, 0]  # back at the free queue's tail
    assert sliding.ref_count(0) == 0
    c.mark_all_computed(["a"])  # 7 computed, the reservation started at 6: still block 0 only
    c.append_each(["a"], [8])  # from 7: keys from 4 on, block 1 (2, 3) dropped
    assert c.group_tables("a")[1] == [-1, -1, 2, 3]
    assert sliding.free_block_ids() == [4, 5, 6, 7, 0, 1]
    assert c.num_tokens("a") == 8 and c.managers[0].num_tokens("a") == 8
    c.free("a")
    assert [m.n_free_blocks for m in c.managers] == [8, 8]
    assert sliding.free_block_ids() == [4, 5, 6, 7, 0, 1, 3, 2]


def test_copy_on_write_pairs_name_their_group_and_copy_in_its_layers_only():
    store_layers = 3
    from inferlab.engines.kv.cache import PagedKVCache
    store = PagedKVCache(store_layers, 8, 2, 1, 2)
    cache = GroupedKVCache(store, (FULL, SLIDING))
    c = coordinator()
    c.allocate("a", [1, 2, 3])
    c.mark_computed("a", 3)
    c.fork("a", "b")
    store.kv.copy_(torch.arange(store.kv.numel(), dtype=torch.float32).view(store.kv.shape))
    before = store.kv.clone()
    cows = c.append_each(["b"], [9])[1]
    assert cows == [("b", 1, 2), ("b", 8 + 1, 8 + 2)]  # block 1 in each group: b's copy is 2
    cache.copy_blocks([(s, d) for _, s, d in cows])
    assert torch.equal(store.kv[:, :, :, 2], before[:, :, :, 1])  # every layer: both groups
    store.kv.copy_(before)
    cache.copy_blocks([(9, 10)])  # the sliding group's pair alone
    assert torch.equal(store.kv[[0, 2], :, :, 2], before[[0, 2], :, :, 1])
    assert torch.equal(store.kv[1], before[1])  # the full-attention layer untouched
    with pytest.raises(ValueError, match="not two blocks of one"):
        cache.copy_blocks([(1, 10)])


def test_a_group_that_runs_short_undoes_the_others_so_the_groups_agree():
    c = coordinator(n_blocks=3, groups=(FULL, LayerGroup(64, (0, 2))))
    c.allocate("a", [1, 2, 3, 4])
    c.mark_computed("a", 4)
    c.managers[1].allocate("x", [1])  # the window group's last free block taken
    with pytest.raises(KVOutOfMemoryError):
        c.append_each(["a"], [5], partial=False)
    assert c.group_tables("a") == ([0, 1], [0, 1])
    assert c.managers[0].n_free_blocks == 1 and c.num_tokens("a") == 4
    with pytest.raises(KVOutOfMemoryError):
        c.append_tokens("a", [5, 6])
    assert c.managers[0].num_tokens("a") == 4 == c.managers[1].num_tokens("a")


def test_a_decode_step_stops_where_any_group_runs_short_its_tables_cut_to_match():
    c = coordinator(n_blocks=4, groups=(FULL, LayerGroup(64, (0, 2))))
    for sid in ("a", "b"):
        c.allocate(sid, [1, 2])
        c.mark_computed(sid, 2)
    c.managers[1].allocate("x", [1])  # the window group has one free block, the full two
    tables = c.tables(["a", "b"])
    assert c.append_each(["a", "b"], [3, 3], tables=tables) == (1, [])
    assert c.group_tables("a") == ([0, 2], [0, 3]) and c.group_tables("b") == ([1], [1])
    assert [m.num_tokens("b") for m in c.managers] == [2, 2]
    assert c.managers[0].free_block_ids() == [3]  # b's new block in the full group given back


def test_a_truncation_that_would_read_a_dropped_block_is_refused_and_changes_nothing():
    c = coordinator()
    c.allocate("a", list(range(8)))
    c.mark_computed("a", 8)
    c.append_tokens("a", [8, 9, 10])  # drafts from 8: blocks before 8 - 4 + 1 = 5 dropped
    assert c.group_tables("a")[1] == [-1, -1, 2, 3, 4, 5]
    c.mark_computed("a", 11)  # a verify step: the reservation started at 8, nothing more
    assert c.group_tables("a")[1] == [-1, -1, 2, 3, 4, 5]
    assert c.truncate("a", 9) == [5, 8 + 5]  # the rejected drafts' blocks, group by group
    with pytest.raises(ValueError, match="already dropped"):
        c.truncate("a", 4)  # a query at 4 reads key 1, in dropped block 0
    assert c.num_tokens("a") == 9 and c.group_tables("a")[1] == [-1, -1, 2, 3, 4]


def test_prefix_hits_are_the_hit_every_group_has_and_a_dropped_block_is_not_matchable():
    c = coordinator(n_blocks=16, prefix_cache="hash")
    prompt = list(range(10))
    c.allocate("a", prompt)
    c.mark_computed("a", 10)
    assert c.cached_prefix_len(prompt + [99]) == 10  # both groups still hold every block
    assert c.allocate("b", prompt + [99]) == 10
    assert c.group_tables("b")[0][:5] == c.group_tables("a")[0]
    assert c.group_tables("b")[1][:5] == [-1, -1, -1, 3, 4]  # behind b's window at once
    c.free("b")
    for t in range(10, 14):  # a decodes on: its window leaves the prompt's first blocks
        c.append_each(["a"], [t])
        c.mark_all_computed(["a"])
    assert c.group_tables("a")[1][:3] == [-1, -1, -1]
    assert c.managers[0].cached_prefix_len(prompt + [99]) == 10  # the full group has it all
    assert c.cached_prefix_len(prompt + [99]) == 0  # block 0 left the sliding group's cache
    assert c.allocate("c", prompt + [99]) == 0
    assert c.prefix_hit_tokens == 10


@settings(max_examples=60, deadline=None)
@given(window=st.integers(1, 24), block_size=st.integers(1, 8), prompt=st.integers(1, 40),
       chunk=st.integers(1, 16), decode=st.integers(0, 40), caching=st.booleans())
def test_past_the_window_a_sliding_group_holds_at_most_w_over_block_size_plus_one(
        window, block_size, prompt, chunk, decode, caching):
    """Driven as a runner drives it (chunked prefill, then decodes), the sliding group keeps
    every block a query still to run reads, and past the window at most ⌈W/bs⌉ + 1 blocks;
    the full group every block; no block leaks."""
    groups = (LayerGroup(0, (0,)), LayerGroup(window, (1, 2)))
    c = KVCacheCoordinator(groups, 128, block_size, prefix_cache="hash" if caching else "none")
    tokens = [i % 7 for i in range(prompt + decode)]
    bound = -(-window // block_size) + 1

    def check(next_query: int) -> None:
        full, sliding = c.group_tables("s")
        n = c.num_tokens("s")
        assert NULL_BLOCK.block_id not in full and len(full) == -(-n // block_size)
        first_read = max(0, next_query - window + 1) // block_size
        assert all(b >= 0 for b in sliding[first_read:])  # every key still to read is held
        for m in c.managers:  # what the tables hold is what the pool lends
            held = {b for t in (m.block_table(s) for s in m.seq_ids) for b in t if b >= 0}
            assert m.pool.n_used == len(held)

    c.allocate("s", tokens[:min(chunk, prompt)])
    done = 0
    while True:
        n = c.num_tokens("s")
        check(done)
        c.mark_computed("s", n)
        done = n
        if n >= prompt:
            break
        c.append_tokens("s", tokens[n:min(n + chunk, prompt)])
    for t in tokens[prompt:]:
        assert c.append_each(["s"], [t]) == (1, [])
        check(done)
        if c.num_tokens("s") > window:
            assert sum(b >= 0 for b in c.group_tables("s")[1]) <= bound
        c.mark_all_computed(["s"])
        done = c.num_tokens("s")
    held = c.held()
    assert held[0].blocks_held == held[0].blocks_full == -(-c.num_tokens("s") // block_size)
    if c.num_tokens("s") > window and decode:
        assert held[1].blocks_held <= bound
    c.free("s")
    assert all(m.pool.n_used == 0 for m in c.managers)


def test_each_groups_input_batch_matches_its_rebuilt_metadata_after_drops():
    c = coordinator(n_blocks=32)
    c.allocate("a", list(range(9)))
    c.mark_computed("a", 9)
    c.allocate("b", list(range(3)))
    c.mark_computed("b", 3)
    batches = [InputBatch(m) for m in c.managers]
    for step in range(6):
        c.append_each(["a", "b"], [step, step])
        for m, batch in zip(c.managers, batches, strict=True):
            got = batch.metadata(["a", "b"], [1, 1])
            want = build_attention_metadata(m, ["a", "b"], [1, 1])
            for field in ("positions", "slot_mapping", "query_start_loc", "context_lens",
                          "block_tables"):
                assert torch.equal(getattr(got, field), getattr(want, field)), field
        c.mark_all_computed(["a", "b"])
    assert (batches[1].metadata(["a"], [1]).block_tables < 0).any()


# ---- the model: the same tokens and logits as keeping every block --------------------------


@pytest.fixture(scope="module", params=["gemma3_text", "mistral"])
def family_model(request):
    pytest.importorskip("transformers")
    from inferlab.engines.model.llama import Llama
    from tests.engines.model.hf_reference import hf_model, hf_state_dict

    hf, config = hf_model(request.param)
    cfg = model_config_from_hf(config, id=request.param)
    kernels = "torch" if request.param == "mistral" else "auto"
    return Llama.from_state_dict(cfg, hf_state_dict(hf), "fp32", kernels=kernels)


PROMPTS = [[(7 * i + 3 * j + 3) % 250 + 3 for j in range(n)] for i, n in
           enumerate((30, 5, 19, 26))]


def run_chunked(model, free: bool, block_size: int, chunk: int, n_new: int):
    """Each prompt prefilled `chunk` tokens at a time, all decoded together greedily: the
    tokens, every step's logits and the runner."""
    runner = ModelRunner(model, n_blocks=256, block_size=block_size, free_window_blocks=free)
    order = list(range(len(PROMPTS)))
    done = dict.fromkeys(order, 0)
    logits, tokens, last = [], {i: [] for i in order}, {}
    while any(done[i] < len(PROMPTS[i]) for i in order):
        ids = [i for i in order if done[i] < len(PROMPTS[i])]
        for i in ids:
            runner.reserve(i, PROMPTS[i][done[i]: done[i] + chunk])
            done[i] = min(len(PROMPTS[i]), done[i] + chunk)
        rows = runner.step(ids)
        logits.append(rows)
        last |= dict(zip(ids, rows, strict=True))
    for _ in range(n_new):
        for i in order:
            tokens[i].append(int(last[i].argmax()))
            runner.append(i, tokens[i][-1])
        rows = runner.step(order)
        logits.append(rows)
        last = dict(zip(order, rows, strict=True))
    return tokens, logits, runner


@pytest.mark.parametrize("block_size,chunk", [(4, 7), (3, 32), (1, 5)])
def test_dropping_blocks_gives_the_logits_of_keeping_every_block(family_model, block_size,
                                                                 chunk):
    got, got_logits, runner = run_chunked(family_model, True, block_size, chunk, 14)
    want, want_logits, keep = run_chunked(family_model, False, block_size, chunk, 14)
    assert got == want
    for a, b in zip(got_logits, want_logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert isinstance(runner.blocks, KVCacheCoordinator) and isinstance(keep.blocks, BlockManager)
    window = max(lw.window for lw in family_model.layers)
    held = runner.blocks.held()
    sliding = held[-1]
    assert sliding.group.window == window
    assert sliding.blocks_held <= len(PROMPTS) * (-(-window // block_size) + 1)
    assert sliding.blocks_held < sliding.blocks_full
    if len(held) > 1:  # gemma3: the global layer keeps every block, in a GroupedKVCache
        assert held[0].blocks_held == held[0].blocks_full
        assert isinstance(runner.cache, GroupedKVCache)
        assert isinstance(runner.last_metadata, GroupedMetadata)


def test_a_fork_copies_its_shared_block_in_each_group_and_decodes_as_keeping_all(family_model):
    def run(free: bool):
        runner = ModelRunner(family_model, n_blocks=64, block_size=4, free_window_blocks=free)
        runner.add("p", PROMPTS[0][:22])  # ends inside a block: the fork shares it
        out = {"p": runner.step(["p"])[0]}
        runner.fork("p", "c")
        first = {"p": int(out["p"].argmax()), "c": int(out["p"].argsort()[-2])}
        logits = []
        for sid, token in first.items():
            runner.append(sid, token)
        for _ in range(10):
            rows = runner.step(["p", "c"])
            logits.append(rows)
            for sid, row in zip(("p", "c"), rows, strict=True):
                runner.append(sid, int(row.argmax()))
        return logits

    for a, b in zip(run(True), run(False), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_blocks", [40, 16])
def test_the_continuous_batcher_generates_what_keeping_every_block_generates(family_model,
                                                                              n_blocks):
    """Chunked prefills and decodes of several sequences in one batch; with 16 blocks the
    pool runs short and sequences are preempted (a decode step stopped where a group ran
    short, the rest reserved one by one)."""
    def serve(free: bool):
        runner = ModelRunner(family_model, n_blocks=n_blocks, block_size=4,
                             free_window_blocks=free)
        requests = [Request(f"q{i}", p, 9 + i) for i, p in enumerate(PROMPTS)]
        sched = Scheduler(CONTINUOUS, runner.blocks, max_num_batched_tokens=12)
        engine = ServingEngine(sched, ModelExecutor(runner), requests)
        records = engine.run()
        assert any(p.start > 0 for r in records for p in r.prefills)  # chunked prefills
        assert max(r.batch_size for r in records) > 1
        assert runner.blocks.n_free_blocks == n_blocks and not runner.blocks.seq_ids
        return {sid: s.output_ids for sid, s in sched.seqs.items()}, sched.num_preemptions

    (got, _), (want, preempted) = serve(True), serve(False)
    assert got == want
    assert preempted > 0 if n_blocks == 16 else preempted == 0


def test_token_trees_are_refused_where_a_window_dropped_blocks(family_model):
    runner = ModelRunner(family_model, n_blocks=64, block_size=4)
    runner.add("a", PROMPTS[0])
    runner.step(["a"])
    runner.append_tokens("a", [5, 6])
    mask = torch.ones(2, 32, dtype=torch.bool)
    with pytest.raises(ValueError, match="window dropped|several layer groups"):
        runner.forward_masked("a", 30, torch.tensor([30, 31]), mask)


def test_the_radix_prefix_cache_keeps_every_block(family_model):
    runner = ModelRunner(family_model, n_blocks=64, block_size=4, prefix_cache="radix")
    assert isinstance(runner.blocks, BlockManager) and runner.cache is runner.store
    with pytest.raises(ValueError, match="radix"):
        coordinator(prefix_cache="radix")


# ---- the bytes held against keeping every token ---------------------------------------------------

GEMMA3_270M = dict(
    model_type="gemma3_text", vocab_size=262144, hidden_size=640, intermediate_size=2048,
    num_hidden_layers=18, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
    sliding_window=512, layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 3,
    max_position_embeddings=32768, rope_theta=1e6, rope_local_base_freq=1e4,
    query_pre_attn_scalar=256, rms_norm_eps=1e-6, tie_word_embeddings=True)


def test_gemma3_270m_at_8k_holds_about_a_fifth_of_keeping_every_token():
    cfg = model_config_from_hf(GEMMA3_270M, id="gemma-3-270m")
    held = kv_held(cfg, 8192, "bf16")
    assert held.ratio == pytest.approx((3 * 8192 + 15 * 512) / (18 * 8192)) == 0.21875
    assert held.held_bytes == kv_bytes_per_request(cfg, 8192, "bf16")
    assert held.full_bytes == 8192 * kv_bytes_per_token(cfg, "bf16")
    assert [(g.window, g.n_layers) for g in held.groups] == [(0, 3), (512, 15)]
    assert sum(g.held_bytes for g in held.groups) == held.held_bytes
    assert kv_held(cfg, [100, 300]).ratio == 1.0  # inside the window nothing is dropped
    two = kv_held(cfg, [8192, 8192], "bf16")
    assert (two.held_bytes, two.full_bytes) == (2 * held.held_bytes, 2 * held.full_bytes)


def test_the_blocks_held_agree_with_the_closed_form_up_to_a_block_per_group(family_model):
    runner = ModelRunner(family_model, n_blocks=64, block_size=4)
    runner.add("a", PROMPTS[0])
    out = runner.step(["a"])
    for _ in range(30):
        runner.append("a", int(out.argmax()))
        out = runner.step(["a"])
    n = runner.blocks.num_tokens("a")
    closed = kv_held(family_model.config, n, "fp32")
    for group, bytes_ in zip(runner.blocks.held(), closed.groups, strict=True):
        per_token = bytes_.full_bytes // n
        held_tokens = bytes_.held_bytes // per_token
        assert group.blocks_held * 4 - held_tokens in range(0, 2 * 4)  # whole blocks
        assert group.bytes_per_block == 4 * per_token
