"""Parallel sampling forks (vLLM v0's n > 1) in a running `Scheduler`.

Right after a parent's prefill, `Scheduler.update(..., forks=...)` (or `Scheduler.fork`
between iterations) gives it children that share every block (BlockManager.fork), each with
its own first token. A shared, partly filled last block is copied on the first append that
needs it: those copies are in `SchedulerOutput.copies`, and the executor makes them in the
cache before the forward (the scheduler only reserves; it never touches K/V).

    check_update_forks(sched, sample_ids, forks)   every refusal before anything changes
    fork_sequence(sched, parent_id, child) -> Sequence
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as Seq

from inferlab.engines.serve.request import RUNNING, Request, Sequence


def check_forks(sched, parent: Sequence, children: Seq[Request], n_more: int = 0) -> None:
    """What a fork refuses, checked for all of a parent's children before any is made
    (`n_more`: children of other parents forked in the same update): a policy whose batch is
    fixed, a child id already in use, a child with another prompt or whose max_new_tokens the
    parent's outputs already reach, a child `add` would refuse, more than max_num_seqs."""
    pid = parent.seq_id
    if not sched.batching.can_fork:
        raise ValueError("a static batch is fixed when it starts: it cannot fork")
    ids = [c.request_id for c in children]
    for child in children:
        cid = child.request_id
        if cid in sched.seqs or ids.count(cid) > 1:
            raise ValueError(f"request {cid!r} was already added")
        if child.prompt_ids != parent.request.prompt_ids:
            raise ValueError(f"fork {cid!r} of {pid!r}: a child shares the parent's "
                             "blocks, so it must have the parent's prompt")
        if child.max_new_tokens <= len(parent.output_ids):
            raise ValueError(f"fork {cid!r}: max_new_tokens {child.max_new_tokens} is "
                             f"already reached by the parent's {len(parent.output_ids)} "
                             "outputs")
        sched.check_runnable(child)
    n_running = len(sched.running_seqs) + n_more + len(children)
    if n_running > sched.max_num_seqs:
        raise ValueError(f"forks of {pid!r}: {n_running} sequences would run, "
                         f"max_num_seqs={sched.max_num_seqs}")


def check_update_forks(sched, sample_ids: Seq[str],
                       forks: Mapping[str, Seq[tuple[Request, int]]]) -> None:
    """`update`'s forks (parent id -> [(child request, first token), ...]) refused, before
    anything changes, when a parent samples nothing in the batch (`sample_ids`), a child is
    refused (`check_forks`, counting the children of the parents before it) or a child id
    appears twice."""
    not_sampling = sorted(set(forks) - set(sample_ids))
    if not_sampling:
        raise ValueError(f"forks of {not_sampling}, which sample nothing this iteration")
    n_more = 0
    for pid, children in forks.items():
        check_forks(sched, sched.seqs[pid], [c for c, _ in children], n_more)
        n_more += len(children)
    all_ids = [c.request_id for children in forks.values() for c, _ in children]
    if len(all_ids) != len(set(all_ids)):
        raise ValueError(f"forks name a child twice: {sorted(all_ids)}")


def fork_sequence(sched, parent_id: str, child: Request) -> Sequence:
    """`child` (the parent's prompt, a new id) shares every block of the running `parent_id`
    (BlockManager.fork: ref counts + 1), copies its outputs and token times, and runs from
    now on, right after the parent and its earlier children: as old as the parent, so
    preempted before it. Only once the parent's prefill is done; what `check_forks` refuses
    is refused."""
    parent = sched.seqs.get(parent_id)
    if parent is None or parent.status != RUNNING or parent.is_prefilling:
        raise ValueError(f"cannot fork {parent_id!r}: only a running sequence whose "
                         "prefill is done can fork")
    check_forks(sched, parent, [child])
    cid = child.request_id
    sched.blocks.fork(parent_id, cid)
    seq = Sequence(child, status=RUNNING, output_ids=list(parent.output_ids),
                   num_computed_tokens=parent.num_computed_tokens,
                   num_prefill_tokens=parent.num_prefill_tokens,
                   token_times_s=list(parent.token_times_s),
                   first_scheduled_s=parent.first_scheduled_s, parent_id=parent_id,
                   num_cached_tokens=parent.num_cached_tokens)
    sched.seqs[cid] = seq
    running = sched.running_seqs
    at = running.index(parent) + 1
    while at < len(running) and running[at].parent_id == parent_id:
        at += 1
    running.insert(at, seq)
    return seq
