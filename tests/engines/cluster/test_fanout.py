"""The layout search's probes fanned out: serial and Ray give the same SearchResult, progress
counts every probe, a failing probe is named, Ray missing means serial (said so), and a local
Ray listens on 127.0.0.1 only, without the dashboard or the job API."""

from __future__ import annotations

import ipaddress
import os
import sys

import psutil
import pytest

from inferlab.engines.cluster import fanout as fan
from inferlab.engines.cluster.cluster import ClusterConfig
from inferlab.engines.cluster.fanout import (
    RAY,
    SERIAL,
    Fanout,
    ProbeError,
    ProbeValueError,
    choose_fanout,
    loopback_address,
    ray_session,
    run_probes,
)
from inferlab.engines.cluster.layout import PD, REPLICAS, Layout
from inferlab.engines.cluster.links import load_link_preset
from inferlab.engines.cluster.search import search_layouts
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.model.config import load_model_preset
from inferlab.engines.serve.engine import requests_from_workload
from inferlab.engines.serve.metrics import SLO
from inferlab.engines.serve.workload import LengthDist, Workload, generate

CFG = load_model_preset("llama-3-8b")
BASE = ClusterConfig(CFG, load_hardware_preset("h100-sxm"), load_link_preset("nvlink4"),
                     Layout(REPLICAS))
SLO_ = SLO(ttft_s=1.0, tpot_s=0.05)


def requests(n=40, seed=0):
    items = generate(Workload(n_requests=n, rate_per_s=40.0, seed=seed,
                              prompt_len=LengthDist.lognormal(6.0, 0.5),
                              output_len=LengthDist.lognormal(4.0, 0.5)))
    return requests_from_workload(items, CFG.vocab_size)


def square(offset, x):
    return offset + x * x


def fail_on_three(x):
    if x == 3:
        raise ValueError("three is not allowed")
    return x


def crash_on_two(x):
    if x == 2:
        raise KeyError("two")
    return x


@pytest.fixture
def no_ray(monkeypatch):
    """`import ray` fails, as where the cluster extra is not installed."""
    monkeypatch.setitem(sys.modules, "ray", None)


# ---- serial: the reference -------------------------------------------------------------

def test_serial_runs_in_order_and_counts_progress():
    seen = []
    out = run_probes(square, [(1,), (2,), (3,)], shared=(10,),
                     progress=lambda done, total: seen.append((done, total)))
    assert out == [11, 14, 19]
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_a_failing_probe_is_named_and_keeps_its_kind():
    with pytest.raises(ProbeValueError, match=r"probe tp4 failed: ValueError: three") as e:
        run_probes(fail_on_three, [(1,), (3,)], labels=["tp1", "tp4"])
    assert isinstance(e.value, ValueError) and isinstance(e.value.cause, ValueError)
    with pytest.raises(ProbeError, match="probe b failed: KeyError") as e:
        run_probes(crash_on_two, [(1,), (2,)], labels=["a", "b"])
    assert not isinstance(e.value, ValueError)


def test_without_ray_the_search_runs_serially_and_says_so(no_ray):
    chosen = choose_fanout()
    assert chosen == Fanout(SERIAL, note="ray not installed")
    assert chosen.describe() == "serial (ray not installed)"
    found = search_layouts(BASE, REPLICAS, 2, requests(12), SLO_, fanout=chosen)
    assert found.executor == "serial (ray not installed)"
    assert len(found.cells) == 3
    with pytest.raises(ValueError, match="needs ray"):
        choose_fanout(ray_address="10.0.0.1:6379")


def test_choices_are_checked():
    assert choose_fanout(serial=True).describe() == "serial"
    with pytest.raises(ValueError, match="exclude each other"):
        choose_fanout(serial=True, ray_address="10.0.0.1:6379")
    with pytest.raises(ValueError, match="at least 1"):
        choose_fanout(workers=0)
    assert Fanout(RAY, workers=2).describe() == "ray (local, 2 workers)"
    assert Fanout(RAY, address="10.0.0.1:6379").describe() == "ray (cluster at 10.0.0.1:6379)"


def test_a_loopback_address_is_told_apart():
    for address in ("127.0.0.1:6379", "localhost:6379", "[::1]:6379", "ray://127.0.0.1:10001"):
        assert loopback_address(address), address
    for address in ("10.0.0.1:6379", "head.example:6379", "ray://10.0.0.1:10001"):
        assert not loopback_address(address), address


def test_search_progress_reports_every_layout():
    seen = []
    found = search_layouts(BASE, PD, 4, requests(12), SLO_,
                           progress=lambda f, m: seen.append((f, m)))
    n = len(found.cells)
    assert seen[0] == (0.0, f"serial: {n} layouts to probe")
    assert seen[1:] == [(k / n, f"{k}/{n} layouts probed, serial") for k in range(1, n + 1)]


# ---- on Ray ----------------------------------------------------------------------------

def ray_or_skip():
    return pytest.importorskip("ray")


@pytest.mark.slow
def test_ray_search_equals_the_serial_search():
    ray = ray_or_skip()
    assert not ray.is_initialized()
    reqs = requests(40)
    serial = search_layouts(BASE, PD, 4, reqs, SLO_)
    seen = []
    on_ray = search_layouts(BASE, PD, 4, reqs, SLO_, fanout=Fanout(RAY, workers=2),
                            progress=lambda f, m: seen.append(m))
    assert on_ray == serial  # every cell, the grid and the best, exactly
    assert on_ray.executor == "ray (local, 2 workers)" and serial.executor == "serial"
    n = len(serial.cells)
    assert seen[-1] == f"{n}/{n} layouts probed, ray (local, 2 workers)"
    assert not ray.is_initialized()  # the Ray it started is shut down


@pytest.mark.slow
def test_ray_probes_keep_order_count_progress_and_name_a_failure():
    ray_or_skip()
    seen = []
    with ray_session(Fanout(RAY, workers=2)):  # one start for the three fan-outs
        out = run_probes(square, [(x,) for x in range(8)], shared=(100,),
                         fanout=Fanout(RAY, workers=2),
                         progress=lambda done, total: seen.append((done, total)))
        assert out == [100 + x * x for x in range(8)]
        assert seen == [(k, 8) for k in range(1, 9)]
        with pytest.raises(ProbeValueError, match=r"probe tp4 failed: ValueError: three"):
            run_probes(fail_on_three, [(1,), (3,)], fanout=Fanout(RAY, workers=2),
                       labels=["tp1", "tp4"])
        with pytest.raises(ProbeError, match="probe b failed"):
            run_probes(crash_on_two, [(1,), (2,)], fanout=Fanout(RAY, workers=2),
                       labels=["a", "b"])


def listening(process: psutil.Process) -> list[str]:
    try:
        conns = process.net_connections("inet")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    return [(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]


def loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 (a v6 socket)
    return (mapped or address).is_loopback


@pytest.mark.slow
def test_a_local_ray_listens_on_the_loopback_only_without_dashboard_or_jobs():
    ray = ray_or_skip()
    fanout = choose_fanout(workers=2)
    assert fanout == Fanout(RAY, workers=2)
    auth_mode = os.environ.get("RAY_AUTH_MODE")
    switch = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    with ray_session(fanout):
        run_probes(square, [(1,), (2,)], shared=(0,), fanout=fanout)  # workers up
        assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
        processes = [psutil.Process(), *psutil.Process().children(recursive=True)]
        addresses = {(p.pid, ip, port) for p in processes for ip, port in listening(p)}
        names = " ".join(" ".join(p.cmdline()) for p in processes[1:] if p.is_running())
    assert len(addresses) >= 3  # the GCS, the raylet, the workers: seen, not skipped
    assert all(loopback(ip) for _, ip, _ in addresses), sorted(addresses)
    # the dashboard process runs minimal: no HTTP server (so no job API, no UI, no 8265)
    assert "--minimal" in names and "--disable-frontend" in names
    assert 8265 not in {port for _, _, port in addresses}
    if auth_mode is None:  # Ray's default for a local instance, left on
        assert os.environ.get("RAY_AUTH_MODE") == "token"
    assert os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == switch  # restored
    assert fan.import_ray() is ray
