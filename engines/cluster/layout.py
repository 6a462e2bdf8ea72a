"""A cluster layout: how N GPUs are grouped into serving instances.

    replicas  `replicas` data-parallel instances of tensor degree t behind a router
    tp        one instance of tensor degree t = every GPU
    pd        P prefill and D decode instances, each of tensor degree t (DistServe,
              Splitwise): a request's KV moves from its prefill to its decode instance
    ep        `replicas` instances, each an expert-parallel group of e GPUs, as DeepSeek,
              SGLang (--enable-dp-attention) and vLLM (--enable-expert-parallel with data
              parallel attention) deploy a MoE: TP × EP × DP

An expert-parallel group (Layout.ep = e > 1, or kind ep) is ONE instance on e GPUs: one
scheduler, one batch, the e ranks stepping in lockstep (the all-to-all is a collective).
Inside it the same e GPUs serve two splits at once:

    attention and every dense weight (attention, dense MLP layers, shared experts, router,
    embeddings, lm_head): tensor degree t within e / t data-parallel attention groups; each
    group holds its own requests' KV (t must divide e)
    routed experts: expert-parallel over all e GPUs, E / e each (+ `eplb_slots` redundant
    copies of hot experts per GPU, EPLB), tokens sent to them by dispatch / combine
    all-to-alls on the link (engines/cluster/all_to_all.py)

So a cluster of r × e GPUs is Layout("ep", tp=t, ep=e, replicas=r): TP t × EP e × DP r·e/t.
`dual_batch_overlap`: DeepSeek's two micro-batches, one's all-to-alls hidden behind the
other's compute. A pd layout whose `ep` is e > 1 makes every prefill and decode instance
such a group ((P + D) × e GPUs). EP 1 is no expert parallelism: a replica of t = 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

REPLICAS = "replicas"
TP = "tp"
PD = "pd"
EP = "ep"
LAYOUTS = (REPLICAS, TP, PD, EP)
COLOCATED = "colocated"
PREFILL = "prefill"
DECODE = "decode"


@dataclass(frozen=True)
class Layout:
    kind: str
    tp: int = 1
    replicas: int = 1  # replicas and tp layouts
    prefill: int = 0  # pd layouts
    decode: int = 0
    ep: int = 1  # GPUs of an expert-parallel instance (ep layouts, and pd with EP)
    eplb_slots: int = 0  # redundant expert slots per GPU (0: no balancer)
    dual_batch_overlap: bool = False

    def __post_init__(self) -> None:
        if self.kind not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.kind!r}")
        for name in ("tp", "replicas", "prefill", "decode", "ep", "eplb_slots"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if not isinstance(self.dual_batch_overlap, bool):
            raise ValueError("dual_batch_overlap must be true or false")
        if self.tp < 1:
            raise ValueError(f"tp must be >= 1, got {self.tp}")
        if self.ep < 1:
            raise ValueError(f"ep must be >= 1, got {self.ep}")
        if self.expert_parallel:
            if self.kind not in (EP, PD):
                raise ValueError("expert parallelism is an ep layout or a pd layout's")
            if self.ep % self.tp:
                raise ValueError(f"the attention's tensor degree t = {self.tp} must divide "
                                 f"the expert-parallel degree e = {self.ep}")
        elif self.eplb_slots or self.dual_batch_overlap:
            raise ValueError("EPLB slots and dual-batch overlap need expert parallelism "
                             "(an ep layout, or ep > 1)")
        if self.kind == PD and (self.prefill < 1 or self.decode < 1):
            raise ValueError("a pd layout needs at least one prefill and one decode instance, "
                             f"got {self.prefill}:{self.decode}")
        if self.kind != PD and self.replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {self.replicas}")
        if self.kind == TP and self.replicas != 1:
            raise ValueError("a tp layout is one instance")

    @property
    def roles(self) -> tuple[str, ...]:
        """Each instance's role, in instance order (prefill instances first)."""
        if self.kind == PD:
            return (PREFILL,) * self.prefill + (DECODE,) * self.decode
        return (COLOCATED,) * self.replicas

    @property
    def n_instances(self) -> int:
        return len(self.roles)

    @property
    def expert_parallel(self) -> bool:
        """Each instance an expert-parallel group (kind ep, or a pd layout with ep > 1)."""
        return self.kind == EP or self.ep > 1

    @property
    def gpus_per_instance(self) -> int:
        """e for an expert-parallel group, else t."""
        return self.ep if self.expert_parallel else self.tp

    @property
    def n_gpus(self) -> int:
        return self.n_instances * self.gpus_per_instance

    @property
    def label(self) -> str:
        group = f"t{self.tp}"
        if self.expert_parallel:
            group = f"EP{self.ep} t{self.tp}"
            if self.eplb_slots:
                group += f" +{self.eplb_slots} EPLB"
            if self.dual_batch_overlap:
                group += " DBO"
        if self.kind == PD:
            return f"{self.prefill}P:{self.decode}D × {group}"
        return f"{self.replicas} × {group}"

    def to_dict(self) -> dict:
        """Every field; the expert-parallel ones only where they are not their defaults."""
        out = asdict(self)
        for name, default in (("ep", 1), ("eplb_slots", 0), ("dual_batch_overlap", False)):
            if self.kind != EP and out[name] == default:
                del out[name]
        return out


def layout_for(kind: str, gpus: int, tp: int | None = None, prefill: int | None = None,
               decode: int | None = None, ep: int = 1, eplb_slots: int = 0,
               dual_batch_overlap: bool = False) -> Layout:
    """The layout of `kind` on exactly `gpus` GPUs (the CLI's --layout/--gpus/--tp/--prefill/
    --decode/--ep): replicas = gpus / t; tp: t = gpus; pd: (P + D) × t = gpus, or with ep > 1
    (P + D) × e = gpus; ep: replicas = gpus / e. ValueError says what does not add up."""
    if not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be an integer >= 1, got {gpus!r}")
    ep_fields = {"eplb_slots": eplb_slots, "dual_batch_overlap": dual_batch_overlap}
    if kind not in (EP, PD) and (ep != 1 or eplb_slots or dual_batch_overlap):
        raise ValueError(f"a {kind} layout has no expert parallelism (ep = 1, no EPLB slots, "
                         "no dual-batch overlap)")
    if kind == TP:
        if tp not in (None, gpus):
            raise ValueError(f"a tp layout uses every GPU: t = gpus = {gpus}, not {tp}")
        return Layout(TP, tp=gpus)
    t = 1 if tp is None else tp
    if kind == REPLICAS:
        if gpus % t:
            raise ValueError(f"{gpus} GPUs do not split into replicas of t = {t}")
        return Layout(REPLICAS, tp=t, replicas=gpus // t)
    if kind == EP:
        if gpus % ep:
            raise ValueError(f"{gpus} GPUs do not split into expert-parallel groups of "
                             f"e = {ep}")
        return Layout(EP, tp=t, ep=ep, replicas=gpus // ep, **ep_fields)
    if kind == PD:
        group = ep if ep > 1 else t
        size = f"e = {ep}" if ep > 1 else f"t = {t}"
        if prefill is None or decode is None:
            if gpus // group < 2 or gpus % group:
                raise ValueError(f"{gpus} GPUs at {size} make no prefill:decode pair")
            half = gpus // group // 2
            prefill = half if prefill is None else prefill
            decode = gpus // group - prefill if decode is None else decode
        if (prefill + decode) * group != gpus:
            raise ValueError(f"{prefill} prefill + {decode} decode instances × {size} use "
                             f"{(prefill + decode) * group} GPUs, not {gpus}")
        return Layout(PD, tp=t, prefill=prefill, decode=decode, ep=ep, **ep_fields)
    raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {kind!r}")
