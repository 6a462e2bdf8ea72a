"""The cluster on the simulated clock: one ServingEngine per instance (engines/serve's
scheduler, an InstanceExecutor, or an ExpertParallelExecutor for an expert-parallel group),
a router in front, and the KV transfers of a pd layout.

The event loop takes, at each turn, the earliest of: the next request arriving (at the
router; a decode-bound request arrives when its KV has landed) and the next iteration of an
instance. An arrival at or before an instance's next iteration is routed first, so an
instance admits exactly the requests a lone ServingEngine would: one instance of t = 1 is
the batching lab's simulated run, record for record.

A pd request runs its prefill on a prefill instance as a request of max_new_tokens = 1 (the
first token comes from the prefill, as in DistServe); its prompt's KV then moves over the
link (its kv_bytes_per_request over link_transfer_s: kv_bytes_per_token × prompt tokens
without windowed layers; whole after the prefill or overlapped layer by layer with it,
kv_transfer_exposed_s), and the decode instance takes it as prompt + that token with the
other max_new_tokens − 1 to make, admitted when its pool holds the KV. The prefill instance
frees the blocks when its prefill ends (the transfer is not held against its pool).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from inferlab.engines.cluster.autoscale_records import AutoscaleRun
from inferlab.engines.cluster.ep_executor import (
    ExpertParallelExecutor,
    MoELayerComm,
    ep_pool_blocks,
)
from inferlab.engines.cluster.executor import InstanceExecutor
from inferlab.engines.cluster.expert_load import UNIFORM_LOAD, ExpertLoad
from inferlab.engines.cluster.layout import DECODE, PREFILL, Layout
from inferlab.engines.cluster.links import LinkPreset
from inferlab.engines.cluster.records import ClusterRequest, InstanceRun, KVTransfer
from inferlab.engines.cluster.router import RoutedInstance, Router
from inferlab.engines.hardware.presets import HardwarePreset
from inferlab.engines.kv.block_manager import BlockManager
from inferlab.engines.model.config import ModelConfig
from inferlab.engines.roofline.interconnect import kv_transfer_exposed_s, link_transfer_s
from inferlab.engines.roofline.memory import kv_bytes_per_request, kv_bytes_per_token
from inferlab.engines.roofline.parallel import gpu_share
from inferlab.engines.serve.engine import ServingEngine, check_admissible
from inferlab.engines.serve.metrics import SLO, RequestTiming, ServingMetrics, summarize
from inferlab.engines.serve.request import Request
from inferlab.engines.serve.scheduler import CONTINUOUS, NO_CHUNKING, Scheduler

PROGRESS_EVERY = 500  # requests routed between two progress reports

CLUSTER_POLICIES = (CONTINUOUS, NO_CHUNKING)
"""A router feeds an instance one request at a time, so no instance waits for a batch to
fill: the continuous policies only."""


def instance_pool_blocks(cfg: ModelConfig, preset: HardwarePreset, tp: int = 1,
                         block_size: int = 16, utilization: float = 0.9,
                         dtype: str = "fp16") -> int:
    """KV blocks of a tensor-parallel instance: each GPU's budget ⌊memory × utilization⌋
    minus its share of the weights, over its share of kv_bytes_per_token (gpu_share), in
    blocks. A block holds block_size tokens on all t GPUs at once, in every layer (the pool
    frees no windowed layer's tokens early). For t = 1 this is
    serve.executors.simulated_pool_blocks."""
    share = gpu_share(cfg, tp, 1, dtype, dtype)
    free = math.floor(preset.memory_bytes * utilization) - share.weight_bytes
    n_blocks = max(0, free) // share.kv_bytes_per_token // block_size
    if n_blocks < 1:
        raise ValueError(f"{cfg.id} at t = {tp}: the weights leave no KV block of "
                         f"{block_size} tokens on a {preset.id}")
    return n_blocks


@dataclass(frozen=True)
class ClusterConfig:
    """Everything a run needs besides its requests."""

    model: ModelConfig
    hardware: HardwarePreset
    link: LinkPreset
    layout: Layout
    router: str = "round-robin"
    policy: str = CONTINUOUS
    prefix_cache: str = "hash"
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 128
    overlap_transfer: bool = True
    block_size: int = 16
    dtype: str = "fp16"
    expert_load: ExpertLoad = UNIFORM_LOAD  # how a MoE's tokens spread over its experts


def request_timings(requests) -> list[RequestTiming]:
    """The batching lab's RequestTiming of each ClusterRequest: done when it made every
    token it asked for."""
    return [RequestTiming(r.arrival_s, r.token_times_s, r.prompt_tokens,
                          ok=len(r.token_times_s) == r.max_new_tokens) for r in requests]


@dataclass(frozen=True)
class ClusterResult:
    config: ClusterConfig
    kv_bytes_per_token: int
    requests: tuple[ClusterRequest, ...]
    instances: tuple[InstanceRun, ...]
    transfers: tuple[KVTransfer, ...]
    makespan_s: float  # first arrival -> last token
    moe_layers: tuple[MoELayerComm, ...] = ()  # expert-parallel layouts: Σ over instances
    autoscale: AutoscaleRun | None = None  # an autoscaled fleet's replicas and ticks

    def timings(self) -> list[RequestTiming]:
        """Per request, the batching lab's RequestTiming (for metrics.summarize)."""
        return request_timings(self.requests)

    def metrics(self, slo: SLO | None = None) -> ServingMetrics:
        return summarize(self.timings(), slo=slo)

    def prefix_hit_rate(self) -> float:
        """Σ cached prompt tokens / Σ prompt tokens, each request at its first scheduling on
        the instance that prefilled it."""
        prompt = sum(r.prompt_tokens for r in self.requests)
        return sum(r.cached_tokens for r in self.requests) / prompt if prompt else 0.0


class ClusterSimulation:
    """`run()` routes `requests` through the instances of `config.layout` to their end."""

    def __init__(self, config: ClusterConfig, requests) -> None:
        if config.policy not in CLUSTER_POLICIES:
            raise ValueError(f"policy must be one of {', '.join(CLUSTER_POLICIES)}, "
                             f"got {config.policy!r}")
        self.config = c = config
        self.requests = sorted(requests, key=lambda r: r.arrival_s)
        self.kv_bytes_per_token = kv_bytes_per_token(c.model, c.dtype)
        lay = c.layout
        if lay.expert_parallel:
            self._pool_blocks = ep_pool_blocks(c.model, c.hardware, lay.tp, lay.ep,
                                               lay.eplb_slots, c.block_size, dtype=c.dtype)
        else:
            self._pool_blocks = instance_pool_blocks(c.model, c.hardware, lay.tp,
                                                     c.block_size, dtype=c.dtype)
        self._longest_prompt = max((len(r.prompt_ids) for r in self.requests), default=1)
        self.engines: list[ServingEngine] = []
        self.routed: list[RoutedInstance] = []
        self.roles: list[str] = []
        for role in self._initial_roles():
            self._add_instance(role)
        self.front = [i for i, r in enumerate(self.roles) if r != DECODE]
        self.back = [i for i, r in enumerate(self.roles) if r == DECODE]
        if self.requests:
            # an autoscaled fleet may start with no instance: a spare one checks the requests
            first = (self.engines[self.front[0]] if self.front
                     else self._new_instance(lay.roles[0])[0])
            as_prefill = [self._prefill_request(r) for r in self.requests]
            check_admissible(first.scheduler, as_prefill if self.back else self.requests)
            if self.back:
                check_admissible(self.engines[self.back[0]].scheduler,
                                 [self._decode_request(r, 0, 0.0) for r in self.requests
                                  if r.max_new_tokens > 1])
        self.front_router = Router(c.router)
        self.back_router = Router(c.router)
        self._by_id = {r.request_id: r for r in self.requests}
        self._where: dict[str, int] = {}
        self._decode_at: dict[str, int] = {}
        self._transfer_s: dict[str, float] = {}
        self.transfers: list[KVTransfer] = []

    def _initial_roles(self) -> tuple[str, ...]:
        """The instances the run starts with: the layout's (an autoscaled fleet: its
        minimum)."""
        return self.config.layout.roles

    def _new_instance(self, role: str) -> tuple[ServingEngine, RoutedInstance]:
        """A fresh instance of `role`: its pool, scheduler and executor, taking requests."""
        c, lay = self.config, self.config.layout
        # a decode instance's KV arrives in one piece: its budget takes the longest prompt
        # beside a full batch of decodes
        budget = (c.max_num_batched_tokens if role != DECODE
                  else max(c.max_num_batched_tokens, c.max_num_seqs + self._longest_prompt + 1))
        bm = BlockManager(self._pool_blocks, c.block_size,
                          prefix_cache=c.prefix_cache if role != DECODE else "none")
        scheduler = Scheduler(c.policy, bm, max_num_batched_tokens=budget,
                              max_num_seqs=c.max_num_seqs)
        if lay.expert_parallel:
            executor = ExpertParallelExecutor(
                c.model, c.hardware, lay.tp, lay.ep, c.link, c.dtype,
                kv_arrivals=role == DECODE, load=c.expert_load,
                eplb_slots=lay.eplb_slots, dual_batch_overlap=lay.dual_batch_overlap)
        else:
            executor = InstanceExecutor(c.model, c.hardware, lay.tp, c.link, c.dtype,
                                        kv_arrivals=role == DECODE)
        return (ServingEngine(scheduler, executor, [], accepting=True),
                RoutedInstance(bm, c.block_size))

    def _add_instance(self, role: str) -> int:
        """A new instance of `role` at the end of the instance list; its index."""
        engine, routed = self._new_instance(role)
        self.engines.append(engine)
        self.routed.append(routed)
        self.roles.append(role)
        return len(self.engines) - 1

    def _prefill_request(self, r: Request) -> Request:
        return Request(r.request_id, r.prompt_ids, 1, r.arrival_s) if self.back else r

    @staticmethod
    def _decode_request(r: Request, first_token: int, arrival_s: float) -> Request:
        return Request(r.request_id, (*r.prompt_ids, first_token), r.max_new_tokens - 1,
                       arrival_s)

    def run(self, progress=None) -> ClusterResult:
        """Route and run every request to its end; `progress(fraction, message)` is told
        of the requests routed so far (every PROGRESS_EVERY)."""
        engines, reqs = self.engines, self.requests
        pending: list[tuple[float, int, Request]] = []  # decode-bound arrivals (KV landed)
        k, n_seq = 0, 0
        front_open = back_open = True
        if not reqs:
            front_open = self._close(self.front)
        # each instance's next step time, in a heap with lazy deletion: an entry is current
        # while its time equals next_at[i] (only a step or a submit changes an instance's)
        self._next_at: list[float | None] = [None] * len(engines)
        self._steps: list[tuple[float, int]] = []
        for i in range(len(engines)):
            self._refresh(i)
        steps = self._steps
        while True:
            a_front = reqs[k].arrival_s if k < len(reqs) else math.inf
            a_back = pending[0][0] if pending else math.inf
            while steps and steps[0][0] != self._next_at[steps[0][1]]:
                heapq.heappop(steps)  # stale
            t_min, i_min = steps[0] if steps else (math.inf, -1)
            a = min(a_front, a_back)
            if a == math.inf and i_min < 0:
                break
            if a <= t_min:
                if a_front <= a_back:
                    self._route(reqs[k], self.front, self.front_router)
                    k += 1
                    if progress is not None and k % PROGRESS_EVERY == 0:
                        progress(k / len(reqs), f"{k:,} of {len(reqs):,} requests routed")
                    if k == len(reqs):
                        front_open = self._close(self.front)
                else:
                    self._route(heapq.heappop(pending)[2], self.back, self.back_router)
                continue
            heapq.heappop(steps)
            self._next_at[i_min] = None
            record = engines[i_min].step()
            self._refresh(i_min)
            if record is not None:
                n_seq = self._after_step(i_min, record, pending, n_seq)
            if (self.back and back_open and not front_open and not pending
                    and all(self._next_at[i] is None for i in self.front)):
                back_open = self._close(self.back)
        return self._result()

    def _refresh(self, i: int) -> None:
        """Re-read instance i's next step time into the heap (after a step or a submit)."""
        t = self.engines[i].next_step_s
        if t != self._next_at[i]:
            self._next_at[i] = t
            if t is not None:
                heapq.heappush(self._steps, (t, i))

    def _close(self, instances) -> bool:
        for i in instances:
            self.engines[i].stop_accepting()
        return False

    def _route(self, request: Request, instances: list[int], router: Router) -> None:
        routed = [self.routed[i] for i in instances]
        i = instances[router.choose(request.prompt_ids, routed)]
        if i in self.back:
            self._decode_at[request.request_id] = i
        else:
            self._where[request.request_id] = i
            request = self._prefill_request(request)
        self.routed[i].outstanding_tokens += len(request.prompt_ids) + request.max_new_tokens
        self.engines[i].submit(request)
        self._refresh(i)

    def _after_step(self, i: int, record, pending, n_seq: int) -> int:
        """Outstanding tokens down by the tokens made and the finished prompts; a prefill
        instance's finished requests start their KV transfer."""
        seqs = self.engines[i].scheduler.seqs
        made = len(record.decodes) + sum(1 for p in record.prefills
                                         if not seqs[p.request_id].is_prefilling)
        routed = self.routed[i]
        routed.outstanding_tokens -= made
        for rid in record.finished:
            routed.outstanding_tokens -= seqs[rid].num_prompt_tokens
            if self.roles[i] != PREFILL:
                continue
            original = self._by_id[rid]
            if original.max_new_tokens < 2:
                continue
            seq, link, cfg = seqs[rid], self.config.link, self.config
            end_prefill_s = seq.token_times_s[0]
            kv_bytes = kv_bytes_per_request(cfg.model, len(original.prompt_ids), cfg.dtype)
            transfer_s = link_transfer_s(kv_bytes, link.bandwidth_bytes_per_s, link.latency_s)
            exposed_s = transfer_s
            if cfg.overlap_transfer:
                exposed_s = kv_transfer_exposed_s(transfer_s, link.latency_s,
                                                  end_prefill_s - seq.first_scheduled_s,
                                                  cfg.model.n_layers)
            landed_s = end_prefill_s + exposed_s
            self._transfer_s[rid] = transfer_s
            heapq.heappush(pending, (landed_s, n_seq,
                                     self._decode_request(original, seq.output_ids[0],
                                                          landed_s)))
            n_seq += 1
        return n_seq

    def _result(self) -> ClusterResult:
        out = []
        for r in self.requests:
            rid = r.request_id
            front = self.engines[self._where[rid]].scheduler.seqs[rid]
            times = list(front.token_times_s)
            dst = self._decode_at.get(rid)
            if dst is not None:
                back = self.engines[dst].scheduler.seqs[rid]
                times += back.token_times_s
            out.append(ClusterRequest(rid, r.arrival_s, len(r.prompt_ids), r.max_new_tokens,
                                      self._where[rid], dst, self._transfer_s.get(rid, 0.0),
                                      front.num_cached_tokens or 0, tuple(times)))
        self.transfers = self._transfer_records()
        instances = []
        for i, e in enumerate(self.engines):
            busy = sum(rec.end_s - rec.start_s for rec in e.records)
            instances.append(InstanceRun(i, self.roles[i], self.config.layout.tp,
                                         e.scheduler.blocks.n_blocks, busy, e.executor.comm_s,
                                         tuple(e.request_infos()), tuple(e.records)))
        last = max((t[-1] for t in (r.token_times_s for r in out) if t), default=0.0)
        first = min((r.arrival_s for r in out), default=0.0)
        return ClusterResult(self.config, self.kv_bytes_per_token, tuple(out),
                             tuple(instances), tuple(self.transfers), max(0.0, last - first),
                             self._moe_layers())

    def _moe_layers(self) -> tuple[MoELayerComm, ...]:
        """Each MoE layer's all-to-alls summed over the expert-parallel instances."""
        per = [e.executor.moe_layers() for e in self.engines
               if isinstance(e.executor, ExpertParallelExecutor)]
        if not per:
            return ()
        return tuple(MoELayerComm(ls[0].layer, *(sum(getattr(x, f) for x in ls) for f in (
            "dispatch_s", "combine_s", "dispatch_bytes", "combine_bytes")),
            ls[0].imbalance, ls[0].imbalance_eplb) for ls in zip(*per, strict=True))

    def _transfer_records(self) -> list[KVTransfer]:
        """One span per moved KV, ending when it landed (the decode instance's arrival)."""
        spans = []
        for dst in self.back:
            for r in self.engines[dst].requests:
                rid = r.request_id
                transfer_s = self._transfer_s[rid]
                n_bytes = kv_bytes_per_request(self.config.model, len(r.prompt_ids) - 1,
                                               self.config.dtype)
                spans.append(KVTransfer(rid, self._where[rid], dst,
                                        max(0.0, r.arrival_s - transfer_s), r.arrival_s,
                                        n_bytes))
        spans.sort(key=lambda s: s.start_s)
        return spans


def run_cluster(config: ClusterConfig, requests) -> ClusterResult:
    return ClusterSimulation(config, requests).run()
