"""Independent probes run one after another here, or fanned out as Ray tasks (as Vidur's
config search does): `run_probes(fn, calls, shared=…, fanout=…)` is `[fn(*shared, *args) for
args in calls]`, the results in the calls' order whichever finished first.

    Fanout          where the probes run: serial; or Ray, a local instance of `workers` CPUs
                    or the user's cluster at `address` (only when they name it)
    choose_fanout   the command line's and the lab's choice: Ray when it is importable,
                    serial otherwise, and the Fanout says why ("serial (ray not installed)")
    ray_session     a Ray started for the work and shut down after it (one already running
                    in this process is used and left running)

A local Ray listens on 127.0.0.1 only, with no dashboard and so no job API: Ray's job API
runs code for anyone who reaches it (CVE-2023-48022), and every Ray service runs tasks for
anyone who reaches its port. The node address is the loopback because Ray is told, while it
starts, that this is a one-machine cluster (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, the switch
Ray flips on macOS and Windows: it binds its GCS, raylet, workers and agents to 127.0.0.1;
`_node_ip_address="127.0.0.1"` alone is replaced by the machine's address on Linux). Token
authentication stays as Ray starts it (on by default since Ray 2.59); usage statistics are
not sent (RAY_USAGE_STATS_ENABLED=0). A local Ray costs seconds to start (about 3 s on 2
cores, then each worker imports the probe's module): it is started per search and shut down
at its end, so that no Ray processes outlive the work (a search is one call of a CLI command
or one button of the lab).

`fn` must be a module-level function (Ray pickles it by name; the workers import its module:
on a user's cluster every node needs the same inferlab installed) and the probes
deterministic: the fanned-out results then equal the serial ones exactly.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass

SERIAL = "serial"
RAY = "ray"
NO_RAY = "ray not installed"
OBJECT_STORE_BYTES = 256 * 2 ** 20
"""A local Ray's object store: the probes' shared arguments and their results (Ray's default,
30 % of memory, is far more than a search's requests take)."""
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
"""Set while a local Ray starts (its processes inherit them), then restored."""


class ProbeError(RuntimeError):
    """A probe raised: `label` names it (a layout), `cause` is what it raised."""

    def __init__(self, label: str, cause: BaseException) -> None:
        super().__init__(f"probe {label} failed: {type(cause).__name__}: {cause}")
        self.label, self.cause = label, cause


class ProbeValueError(ProbeError, ValueError):
    """A probe's ValueError (a layout the hardware cannot hold): still a ValueError, so the
    command line prints it as one line."""


def probe_error(label: str, cause: BaseException) -> ProbeError:
    return (ProbeValueError if isinstance(cause, ValueError) else ProbeError)(label, cause)


def import_ray():
    """The `ray` module, or None where it is not installed (`pip install 'inferlab[cluster]'`)."""
    try:
        import ray
    except ImportError:
        return None
    return ray


def machine_cores() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Fanout:
    """Where probes run. kind SERIAL (`note`: why, where Ray was wanted) or RAY: a local Ray
    of `workers` CPUs (one probe per CPU at a time), or the cluster at `address`."""

    kind: str = SERIAL
    address: str | None = None
    workers: int | None = None
    note: str = ""

    def describe(self) -> str:
        """What the output says: "serial (ray not installed)", "ray (local, 2 workers)"."""
        if self.kind == SERIAL:
            return f"serial ({self.note})" if self.note else SERIAL
        if self.address is not None:
            return f"ray (cluster at {self.address})"
        return f"ray (local, {self.workers} worker{'s' if self.workers != 1 else ''})"


def choose_fanout(serial: bool = False, ray_address: str | None = None,
                  workers: int | None = None) -> Fanout:
    """Ray where it is importable (a local instance of `workers` CPUs, default this machine's
    cores; the cluster at `ray_address` only when given), else serial, saying why."""
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if serial:
        if ray_address:
            raise ValueError("a Ray address and serial exclude each other: choose one")
        return Fanout()
    if import_ray() is None:
        if ray_address:
            raise ValueError(f"joining the Ray cluster at {ray_address} needs ray: "
                             "pip install 'inferlab[cluster]'")
        return Fanout(note=NO_RAY)
    if ray_address:
        return Fanout(RAY, address=ray_address, workers=workers)
    return Fanout(RAY, workers=workers or machine_cores())


@contextmanager
def _loopback_only(ray):
    """While a local Ray starts: its node address the loopback (ray's own switch for a
    one-machine cluster, read where it resolves the node's address), no usage statistics."""
    from ray._private import ray_constants  # the switch, as ray reads it after import

    saved_env = {key: os.environ.get(key) for key in LOOPBACK_ENV}
    saved_switch = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(LOOPBACK_ENV)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_switch
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def loopback_address(address: str) -> bool:
    """Whether a Ray address (host:port) names this machine's loopback: Ray would otherwise
    replace 127.0.0.1 by the machine's address and miss a cluster listening on the loopback."""
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def init_local_ray(ray, workers: int) -> None:
    """`ray.init` of a new local instance: `workers` CPUs, listening on 127.0.0.1 only, no
    dashboard (so no job API), a small object store, quiet."""
    with _loopback_only(ray):
        ray.init(address="local", num_cpus=workers, include_dashboard=False,
                 object_store_memory=OBJECT_STORE_BYTES, logging_level=logging.ERROR,
                 log_to_driver=False)


@contextmanager
def ray_session(fanout: Fanout):
    """The `ray` module, initialised for `fanout` (a Ray already running in this process is
    used and left running; one started here is shut down at the end)."""
    ray = import_ray()
    if ray is None:
        raise ValueError(f"{fanout.describe()} needs ray: pip install 'inferlab[cluster]'")
    if ray.is_initialized():
        yield ray
        return
    if fanout.address is not None and loopback_address(fanout.address):
        with _loopback_only(ray):  # a one-machine cluster started as init_local_ray starts one
            ray.init(address=fanout.address, logging_level=logging.ERROR, log_to_driver=False)
    elif fanout.address is not None:
        ray.init(address=fanout.address, logging_level=logging.ERROR, log_to_driver=False)
    else:
        init_local_ray(ray, fanout.workers or machine_cores())
    try:
        yield ray
    finally:
        ray.shutdown()


def run_probes(fn, calls, *, shared: tuple = (), fanout: Fanout | None = None,
               labels=None, progress=None) -> list:
    """[fn(*shared, *args) for args in calls], serially or as Ray tasks (`shared` put in
    Ray's object store once). `progress(done, total)` after each result (1 … total, in the
    order they finish); `labels[i]` names call i in a ProbeError."""
    calls = [tuple(args) for args in calls]
    labels = [str(i) for i in range(len(calls))] if labels is None else list(labels)
    fanout = Fanout() if fanout is None else fanout
    if fanout.kind == SERIAL or not calls:
        return _serial(fn, calls, shared, labels, progress)
    with ray_session(fanout) as ray:
        return _on_ray(ray, fn, calls, shared, labels, progress)


def _serial(fn, calls, shared, labels, progress) -> list:
    out = []
    for i, args in enumerate(calls):
        try:
            out.append(fn(*shared, *args))
        except Exception as e:
            raise probe_error(labels[i], e) from e
        if progress is not None:
            progress(i + 1, len(calls))
    return out


def _call(fn, *args):
    """What each Ray task runs: the probe (its arguments resolved by Ray)."""
    return fn(*args)


def _on_ray(ray, fn, calls, shared, labels, progress) -> list:
    task = ray.remote(num_cpus=1, max_retries=0)(_call)
    shared_refs = [ray.put(value) for value in shared]
    index = {}
    for i, args in enumerate(calls):
        index[task.remote(fn, *shared_refs, *args)] = i
    out: list = [None] * len(calls)
    pending, done = list(index), 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            i = index[ref]
            try:
                out[i] = ray.get(ref)
            except ray.exceptions.RayError as e:  # the probe raised, or its worker died
                for other in pending:
                    ray.cancel(other)
                cause = getattr(e, "cause", None)
                cause = cause if isinstance(cause, BaseException) else e
                raise probe_error(labels[i], cause) from e
            done += 1
            if progress is not None:
                progress(done, len(calls))
    return out
