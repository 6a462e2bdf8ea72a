"""A cluster layout: how N GPUs are grouped into serving instances.

    replicas  `replicas` data-parallel instances of tensor degree t behind a router
    tp        one instance of tensor degree t = every GPU
    pd        P prefill and D decode instances, each of tensor degree t (DistServe,
              Splitwise): a request's KV moves from its prefill to its decode instance
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

REPLICAS = "replicas"
TP = "tp"
PD = "pd"
LAYOUTS = (REPLICAS, TP, PD)
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

    def __post_init__(self) -> None:
        if self.kind not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.kind!r}")
        for name in ("tp", "replicas", "prefill", "decode"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        if self.tp < 1:
            raise ValueError(f"tp must be >= 1, got {self.tp}")
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
    def n_gpus(self) -> int:
        return self.n_instances * self.tp

    @property
    def label(self) -> str:
        if self.kind == PD:
            return f"{self.prefill}P:{self.decode}D × t{self.tp}"
        return f"{self.replicas} × t{self.tp}"

    def to_dict(self) -> dict:
        return asdict(self)


def layout_for(kind: str, gpus: int, tp: int | None = None, prefill: int | None = None,
               decode: int | None = None) -> Layout:
    """The layout of `kind` on exactly `gpus` GPUs (the CLI's --layout/--gpus/--tp/--prefill/
    --decode): replicas = gpus / t; tp: t = gpus; pd: (P + D) × t = gpus. ValueError says
    what does not add up."""
    if not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be an integer >= 1, got {gpus!r}")
    if kind == TP:
        if tp not in (None, gpus):
            raise ValueError(f"a tp layout uses every GPU: t = gpus = {gpus}, not {tp}")
        return Layout(TP, tp=gpus)
    t = 1 if tp is None else tp
    if kind == REPLICAS:
        if gpus % t:
            raise ValueError(f"{gpus} GPUs do not split into replicas of t = {t}")
        return Layout(REPLICAS, tp=t, replicas=gpus // t)
    if kind == PD:
        if prefill is None or decode is None:
            if gpus // t < 2 or gpus % t:
                raise ValueError(f"{gpus} GPUs at t = {t} make no prefill:decode pair")
            half = gpus // t // 2
            prefill = half if prefill is None else prefill
            decode = gpus // t - prefill if decode is None else decode
        if (prefill + decode) * t != gpus:
            raise ValueError(f"{prefill} prefill + {decode} decode instances × t = {t} use "
                             f"{(prefill + decode) * t} GPUs, not {gpus}")
        return Layout(PD, tp=t, prefill=prefill, decode=decode)
    raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {kind!r}")
