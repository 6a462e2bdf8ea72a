"""KVLabSession: every scenario on the tiny model, checked step by step against the allocators."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.engines.kv.pool_state import CACHED_FREE, FREE, SHARED, USED
from inferlab.engines.labs.kv.records import FINISHED, PREEMPTED, REFUSED, RUNNING, WAITING
from inferlab.engines.labs.kv.scenarios import SCENARIO_NAMES, get_scenario, prepare
from inferlab.engines.labs.kv.session import KVLabSession
from inferlab.engines.model.generate import generate


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_records_agree_with_the_allocators(run_scenario, name):
    run = run_scenario(name)
    s = run.session
    bs = s.block_size
    assert run.records and [r.step for r in run.records] == list(range(len(run.records)))
    for rec, (paged, contiguous) in zip(run.records, run.live_stats, strict=True):
        assert rec.paged == paged and rec.contiguous == contiguous
        pool = rec.pool
        assert pool.n_blocks == s.n_blocks == rec.paged.blocks_total
        assert np.count_nonzero((pool.state == USED) | (pool.state == SHARED)) == paged.blocks_used
        assert np.count_nonzero(pool.state == SHARED) == paged.shared_blocks
        assert np.count_nonzero(pool.state == CACHED_FREE) == paged.blocks_cached_free
        assert np.count_nonzero(pool.state == FREE) == paged.blocks_free
        # every live sequence's table covers exactly its tokens; owners are table holders
        running = {q.seq_id: q for q in rec.seqs if q.status == RUNNING}
        assert set(pool.seq_ids) == set(running)
        for sid, table in zip(pool.seq_ids, pool.block_tables, strict=True):
            assert len(table) == -(-running[sid].kv_tokens // bs)
            assert all(pool.ref_count[b] >= 1 for b in table)
        assert sum(q.kv_tokens for q in running.values()) == paged.tokens_logical
        assert paged.slots_filled == int(pool.n_tokens[pool.ref_count > 0].sum())
        # the contiguous regions are what its stats count
        assert sum(r.reserved for r in rec.regions) == contiguous.slots_reserved
        assert sum(r.filled for r in rec.regions) == contiguous.slots_filled
        assert all(r.reserved == s.max_seq_len for r in rec.regions)
        spans = sorted([(r.start, r.reserved) for r in rec.regions] + list(rec.contiguous_free))
        assert spans[0][0] == 0 and sum(n for _, n in spans) == contiguous.total_slots
    last = run.records[-1]
    assert s.done and not s.running and not s.waiting
    assert last.paged.blocks_used == 0 and last.contiguous.slots_reserved == 0
    assert {q.status for q in last.seqs} <= {FINISHED, REFUSED}


@pytest.mark.parametrize("name", ["ragged", "shared-prompt", "pressure"])
def test_greedy_outputs_equal_generation_without_paging(run_scenario, tiny, name):
    model, _tok = tiny
    run = run_scenario(name)
    outputs = run.session.outputs()
    checked = 0
    for seq in run.session.seqs.values():
        if seq.status != FINISHED:
            continue
        ref = generate(model, [seq.prompt_ids], seq.req.spec.max_new_tokens, use_cache=False)
        assert outputs[seq.info.seq_id] == list(ref.generations[0].token_ids), seq.info.seq_id
        checked += 1
    assert checked >= 8


def test_shared_prompt_hits_the_prefix_cache(run_scenario):
    run = run_scenario("shared-prompt")
    s = run.session
    first = s.seqs["r0"]
    system_blocks = len(first.prompt_ids) // s.block_size - 2  # the system part at least
    assert first.n_cached == 0
    for sid in ("r1", "r2", "r7"):
        assert s.seqs[sid].n_cached >= system_blocks * s.block_size, sid
        assert s.seqs[sid].n_cached % s.block_size == 0
    assert run.records[-1].paged.prefix_hit_rate > 0.5
    assert max(r.paged.shared_blocks for r in run.records) >= system_blocks
    assert any("from the prefix cache" in e for r in run.records for e in r.events)
    # the contiguous allocator shares nothing: it holds the system prompt once per request
    peak = max(run.records, key=lambda r: r.contiguous.slots_reserved)
    assert peak.contiguous.slots_reserved > 2 * max(r.paged.slots_reserved for r in run.records)


def test_fork_shares_blocks_then_copies_on_write(run_scenario):
    run = run_scenario("fork")
    s = run.session
    n = get_scenario("fork").requests[0].n_samples
    fork_step = next(r for r in run.records if r.seq("r0.1") is not None)
    pool = fork_step.pool
    tables = dict(zip(pool.seq_ids, pool.block_tables, strict=True))
    parent = tables["r0"]
    assert [tables[f"r0.{k}"] for k in range(1, n)] == [parent] * (n - 1)
    assert all(pool.ref_count[b] == n for b in parent)
    assert all(pool.state[b] == SHARED for b in parent)
    assert len(s.seqs["r0"].prompt_ids) % s.block_size, "the last prompt block is partial"
    # next step: each sample but the last to append copies the shared partial block
    after = run.records[fork_step.step + 1]
    cows = [e for e in after.events if e.startswith("r0") and "copy-on-write" in e]
    assert len(cows) == n - 1
    tables = dict(zip(after.pool.seq_ids, after.pool.block_tables, strict=True))
    lasts = {tables[sid][-1] for sid in tables if sid.split(".")[0] == "r0"}
    assert len(lasts) == n  # every sample now owns its own last block
    full = parent[:-1]
    assert all(after.pool.ref_count[b] == n for b in full)  # full prompt blocks stay shared
    assert s.n_cow_copies == sum(q.n_samples - 1 for q in get_scenario("fork").requests)
    # the samples differ (temperature 0.7, seeded), and the contiguous side copied everything
    texts = {q.output_text for q in run.records[-1].seqs if q.seq_id.startswith("r0")}
    assert len(texts) > 1
    assert max(r.contiguous.slots_reserved for r in run.records) >= n * s.max_seq_len


def test_pressure_refuses_the_impossible_request_and_queues_the_others(run_scenario):
    run = run_scenario("pressure")
    s = run.session
    long = s.seqs["r-long"]
    assert long.status == REFUSED and long.c_status == REFUSED
    assert "can never run" in long.message and f"{s.n_blocks} blocks" in long.message
    assert len(long.prompt_ids) > s.n_blocks * s.block_size
    refused_at = next(r for r in run.records if r.seq("r-long") is not None)
    assert any("r-long refused" in e for e in refused_at.events)
    # others waited for blocks while the pool was nearly full, and all of them finished
    waits = [r for r in run.records
             if any(q.status in (WAITING, PREEMPTED) for q in r.seqs if q.seq_id != "r-long")
             and r.step > max(q.arrival_step for q in get_scenario("pressure").requests)]
    assert waits
    assert min(r.paged.blocks_free + r.paged.blocks_cached_free for r in waits) <= 3
    assert all(q.status == FINISHED for q in run.records[-1].seqs if q.seq_id != "r-long")
    assert s.n_preemptions >= 1
    # a wait that goes on step after step is told once (again when its numbers change)
    for a, b in zip(run.records[:-1], run.records[1:], strict=True):
        assert not {e for e in a.events if " waits" in e} & {e for e in b.events if " waits" in e}


def test_paged_and_contiguous_run_the_same_requests(run_scenario):
    run = run_scenario("ragged")
    last = run.records[-1]
    assert all(q.status == FINISHED and q.contiguous_status == FINISHED for q in last.seqs)
    paged_peak = max(r.paged.n_seqs for r in run.records)
    contiguous_peak = max(r.contiguous.n_seqs for r in run.records)
    assert paged_peak == len(last.seqs) > contiguous_peak
    p = max(run.records, key=lambda r: (r.paged.slots_reserved, r.paged.slots_filled)).paged
    c = max(run.records, key=lambda r: (r.contiguous.slots_reserved,
                                        r.contiguous.slots_filled)).contiguous
    assert p.waste_frac < 0.25 and c.waste_frac > max(0.4, 2 * p.waste_frac)
    # the contiguous side needs more steps to get through the same requests
    last_paged = max(r.step for r in run.records if r.paged.n_seqs)
    assert last.step > last_paged


def test_pool_size_and_block_size_are_settings(tiny):
    prepared = prepare("ragged", tiny[1], block_size=8, n_blocks=200)
    assert (prepared.block_size, prepared.n_blocks) == (8, 200)
    s = KVLabSession(*tiny, prepared)
    rec = s.step()
    assert rec.pool.n_blocks == 200 and rec.pool.block_size == 8
    assert all(len(t) == -(-s.blocks.num_tokens(sid) // 8)
               for sid, t in zip(rec.pool.seq_ids, rec.pool.block_tables, strict=True))
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        prepare("nope", tiny[1])


def test_a_pool_too_small_for_any_request_refuses_them_all(tiny):
    s = KVLabSession(*tiny, "ragged", n_blocks=1)
    records = s.run()
    assert all(q.status == REFUSED and "can never run" in q.message for q in records[-1].seqs)
    assert not any(r.ran_model for r in records)


def test_a_finished_session_says_so(tiny):
    s = KVLabSession(*tiny, "fork")
    s.run()
    with pytest.raises(RuntimeError, match="finished"):
        s.step()


def test_the_session_runs_on_the_serving_scheduler(run_scenario):
    from inferlab.engines.serve.scheduler import CONTINUOUS

    s = run_scenario("pressure").session
    sched = s.scheduler
    assert sched.policy == CONTINUOUS and sched.blocks is s.blocks
    assert not sched.has_unfinished and s.n_preemptions == sched.num_preemptions >= 1
    assert sched.max_num_batched_tokens >= 2 * s.n_blocks * s.block_size  # never chunked
    fork = run_scenario("fork").session
    assert fork.scheduler.seqs["r0.1"].parent_id == "r0"
    assert fork.scheduler.seqs["r0.1"].output_ids == fork.seqs["r0.1"].outputs


def test_a_quantized_kv_pool_keeps_the_block_accounting_and_shrinks_the_bytes():
    """INT8 / FP8 codes change what a slot costs, not how blocks are handed out."""
    from inferlab.engines.kv.cache import quantized_kv_bytes_per_slot
    from inferlab.engines.labs.kv.session import kv_run
    from inferlab.engines.labs.kv.settings import KV_DEFAULTS

    base = dict(KV_DEFAULTS, model="tiny", scenario="shared-prompt")
    plain, plain_records = kv_run(base)
    cfg = plain.model.config
    for kv_dtype in ("int8", "fp8-e4m3"):
        session, records = kv_run(dict(base, kv_dtype=kv_dtype))
        assert session.bytes_per_slot == quantized_kv_bytes_per_slot(
            cfg.n_layers, cfg.n_kv_heads, cfg.d_head, 1) < plain.bytes_per_slot / 3
        assert [r.paged.slots_reserved for r in records] == \
            [r.paged.slots_reserved for r in plain_records]
