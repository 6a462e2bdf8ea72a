"""The cluster lab's records: a run as the snapshot holds it (`ClusterState`), the layout
search's grid (`search_summary`), and `ClusterSnapshot`, all the lab draws from a snapshot.

`ClusterState.from_dict` and `read_search_summary` read their JSON back strictly (ValueError
naming the field). A huge run keeps every k-th iteration of each instance (and its last), as
the batching lab does; requests and transfers are kept whole (the metrics are recomputed from
them)."""

from __future__ import annotations

from dataclasses import dataclass

from inferlab.engines.cluster.autoscale_records import AutoscaleRun
from inferlab.engines.cluster.cluster import ClusterResult
from inferlab.engines.cluster.records import (
    ClusterRequest,
    InstanceRun,
    KVTransfer,
    MoELayerComm,
)
from inferlab.engines.cluster.search import SEARCH_KINDS, SearchResult
from inferlab.engines.fields import Setting, read_fields, read_list, read_object
from inferlab.engines.trace.snapshot import section_field
from inferlab.engines.trace.thinning import keep_every

ITERATIONS_LIMIT = 50_000
"""Iterations kept over all instances; past it every k-th of each (and its last)."""

NUMBER = Setting("float", 0)
COUNT = Setting("int", 0)


@dataclass(frozen=True)
class ClusterState:
    """A cluster run as the snapshot holds it."""

    kv_bytes_per_token: int
    link_bandwidth_bytes_per_s: float
    link_latency_s: float
    makespan_s: float
    requests: tuple[ClusterRequest, ...]
    instances: tuple[InstanceRun, ...]
    transfers: tuple[KVTransfer, ...]
    iterations_every: int = 1
    moe_layers: tuple[MoELayerComm, ...] = ()  # expert-parallel layouts: per MoE layer
    autoscale: AutoscaleRun | None = None  # an autoscaled fleet: replicas and ticks

    def to_dict(self) -> dict:
        every = self.iterations_every
        instances = []
        for inst in self.instances:
            d = inst.to_dict()
            its, n = d["iterations"], len(d["iterations"])
            d["iterations"] = [r for i, r in enumerate(its) if i % every == 0 or i == n - 1]
            instances.append(d)
        out = {"kv_bytes_per_token": self.kv_bytes_per_token,
               "link": {"bandwidth_bytes_per_s": self.link_bandwidth_bytes_per_s,
                        "latency_s": self.link_latency_s},
               "makespan_s": self.makespan_s, "iterations_every": every,
               "requests": [r.to_dict() for r in self.requests],
               "instances": instances, "transfers": [t.to_dict() for t in self.transfers]}
        if self.moe_layers:
            out["moe_layers"] = [m.to_dict() for m in self.moe_layers]
        if self.autoscale is not None:
            out["autoscale"] = self.autoscale.to_dict()
        return out

    @classmethod
    def from_dict(cls, state: dict, w: str) -> ClusterState:
        """`to_dict`'s dict (`state`, an object at `w`) back; every instance a request or
        transfer names must exist."""
        link = read_object(section_field(state, "link", w), f"{w}.link")
        requests = read_list(section_field(state, "requests", w), ClusterRequest.from_dict,
                             f"{w}.requests")
        instances = read_list(section_field(state, "instances", w), InstanceRun.from_dict,
                              f"{w}.instances", max_len=4096)
        transfers = read_list(section_field(state, "transfers", w), KVTransfer.from_dict,
                              f"{w}.transfers")
        _check_references(requests, instances, transfers, w)
        moe_layers = ()
        if "moe_layers" in state:
            moe_layers = tuple(read_list(state["moe_layers"], MoELayerComm.from_dict,
                                         f"{w}.moe_layers", max_len=4096))
        autoscale = None
        if "autoscale" in state:
            autoscale = AutoscaleRun.from_dict(state["autoscale"], f"{w}.autoscale")
            if len(autoscale.replicas) != len(instances) or any(
                    r.index != i for i, r in enumerate(autoscale.replicas)):
                raise ValueError(f"{w}.autoscale.replicas: one per instance, in order "
                                 f"({len(instances)} instances)")
        return cls(
            COUNT(section_field(state, "kv_bytes_per_token", w), f"{w}.kv_bytes_per_token"),
            NUMBER(section_field(link, "bandwidth_bytes_per_s", f"{w}.link"),
                   f"{w}.link.bandwidth_bytes_per_s"),
            NUMBER(section_field(link, "latency_s", f"{w}.link"), f"{w}.link.latency_s"),
            NUMBER(section_field(state, "makespan_s", w), f"{w}.makespan_s"),
            tuple(requests), tuple(instances), tuple(transfers),
            Setting("int", 1)(section_field(state, "iterations_every", w),
                              f"{w}.iterations_every"), moe_layers, autoscale)


def cluster_state(result: ClusterResult) -> ClusterState:
    """The run's record, thinned to ITERATIONS_LIMIT iterations when written."""
    n = sum(len(i.iterations) for i in result.instances)
    link = result.config.link
    return ClusterState(result.kv_bytes_per_token, link.bandwidth_bytes_per_s, link.latency_s,
                        result.makespan_s, result.requests, result.instances, result.transfers,
                        keep_every(n, 1, ITERATIONS_LIMIT), result.moe_layers,
                        result.autoscale)


def _check_references(requests, instances, transfers, where: str) -> None:
    """Every instance a request or transfer names exists; request ids are distinct; every
    request an instance's iteration names is one of that instance's."""
    n = len(instances)
    ids: set[str] = set()
    for i, r in enumerate(requests):
        if r.request_id in ids:
            raise ValueError(f"{where}.requests[{i}].request_id: {r.request_id!r} is already "
                             f"the id of an earlier request")
        ids.add(r.request_id)
        for name in ("instance", "decode_instance"):
            v = getattr(r, name)
            if v is not None and v >= n:
                raise ValueError(f"{where}.requests[{i}].{name}: no instance {v} "
                                 f"(the run has {n})")
    for i, inst in enumerate(instances):  # the instance's Gantt rows are its requests
        known = {r.request_id for r in inst.requests}
        for j, it in enumerate(inst.iterations):
            for name, rids in (("prefills", [p.request_id for p in it.prefills]),
                               ("decodes", it.decodes), ("preempted", it.preempted),
                               ("finished", it.finished)):
                unknown = next((rid for rid in rids if rid not in known), None)
                if unknown is not None:
                    raise ValueError(f"{where}.instances[{i}].iterations[{j}].{name}: "
                                     f"request {unknown!r} is not among the instance's "
                                     "requests")
    for i, t in enumerate(transfers):
        if t.request_id not in ids:
            raise ValueError(f"{where}.transfers[{i}].request_id: unknown request "
                             f"{t.request_id!r}")
        for name in ("src", "dst"):
            if getattr(t, name) >= n:
                raise ValueError(f"{where}.transfers[{i}].{name}: no instance "
                                 f"{getattr(t, name)} (the run has {n})")


def search_summary(result: SearchResult) -> dict:
    """A SearchResult as the CLI prints it and the snapshot keeps it."""
    best = None if result.best is None else result.cells[result.best]
    return {"kind": result.kind, "budget_gpus": result.budget, "tp_rows": list(result.tps),
            "row_labels": row_labels(result), "columns": list(result.columns),
            "cells": [{"row": c.row, "column": c.column, "label": c.layout.label,
                       "goodput_per_gpu": c.goodput_per_gpu, "attainment": c.attainment,
                       "ttft_p90_s": c.ttft_p90_s, "tpot_p90_s": c.tpot_p90_s}
                      for c in result.cells],
            "best": None if best is None else best.layout.label,
            "best_goodput_per_gpu": None if best is None else best.goodput_per_gpu,
            "executor": result.executor}


def row_labels(result: SearchResult) -> list[str]:
    """Each row's name: "t2", or for the ep search "EP16 t2" (its cells' group)."""
    labels = [f"t{t}" for t in result.tps]
    for c in result.cells:
        if c.layout.expert_parallel:
            labels[c.row] = f"EP{c.layout.ep} t{c.layout.tp}"
    return labels


def read_search_summary(value, where: str) -> dict:
    """`search_summary`'s dict read back strictly (cells inside the grid, best one of them)."""
    top = read_fields(value, {
        "kind": Setting("str", choices=SEARCH_KINDS), "budget_gpus": Setting("int", 1, 1024),
        "tp_rows": Setting("int-list", 1, 1024, max_len=64),
        "columns": Setting("str-list", max_len=64),
        "cells": lambda v, w: read_list(v, _search_cell, w, max_len=4096),
        "best": Setting("str", none=True, max_len=200),
        "best_goodput_per_gpu": Setting("float", 0, none=True),
        "executor": Setting("str", none=True, max_len=200),
        "row_labels": Setting("str-list", max_len=64, none=True)}, where,
        # where the probes ran, the rows' names: older snapshots do not say
        optional={"executor": None, "row_labels": None})
    if top["row_labels"] is not None and len(top["row_labels"]) != len(top["tp_rows"]):
        raise ValueError(f"{where}.row_labels: {len(top['row_labels'])} labels for "
                         f"{len(top['tp_rows'])} rows")
    labels = set()
    for i, cell in enumerate(top["cells"]):
        if cell["row"] >= len(top["tp_rows"]) or cell["column"] >= len(top["columns"]):
            raise ValueError(f"{where}.cells[{i}]: row {cell['row']}, column "
                             f"{cell['column']} is outside the grid")
        labels.add(cell["label"])
    if top["best"] is not None and top["best"] not in labels:
        raise ValueError(f"{where}.best: {top['best']!r} is none of the cells")
    return top


def _search_cell(value, where: str) -> dict:
    maybe_s = Setting("float", 0, none=True)
    return read_fields(value, {"row": Setting("int", 0), "column": Setting("int", 0),
                               "label": Setting("str", max_len=200),
                               "goodput_per_gpu": NUMBER,
                               "attainment": Setting("float", 0, 1),
                               "ttft_p90_s": maybe_s, "tpot_p90_s": maybe_s}, where)


@dataclass(frozen=True)
class ClusterSnapshot:
    """The snapshot's `labs.cluster` as read once (`read_cluster_section`): what the lab's
    view, its comparison plots and its formulas draw."""

    settings: dict  # check_cluster_settings' dict
    state: ClusterState | None  # the run; None: none kept (nothing yet, or a search alone)
    metrics: dict  # the run's serving metrics and cluster figures ({} without a run)
    search: dict | None  # search_summary's dict, when a layout search ran
