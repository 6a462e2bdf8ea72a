"""Batching lab: a seeded request stream through the serving engine, one scheduler iteration a
step, drawn as a timeline of every request's states beside the run's serving metrics.

A stepped lab (`SteppedLab`): the session (engines/labs/batching) lives in worker tasks only; each
iteration's frozen record comes back through a queued signal; the view is redrawn at most at
the screen rate. The header drawn beside the records is (RequestInfo tuple, metrics dict). A
snapshot comes as its record (engines/labs/batching/records.BatchingSnapshot), read once.
"""

from __future__ import annotations

from pathlib import Path

from inferlab.app.labs.stepped import SteppedLab
from inferlab.engines.hardware.cancel import check_stop
from inferlab.engines.labs.batching.compare import (
    compare_policies,
    rate_sweep,
    sweep_rates,
    varied_keys,
)
from inferlab.engines.labs.batching.compare_records import comparison_state
from inferlab.engines.labs.batching.records import BatchingSnapshot
from inferlab.engines.labs.batching.section import batching_section
from inferlab.engines.labs.batching.session import batching_metrics, batching_session
from inferlab.engines.labs.batching.settings import BATCHING_DEFAULTS, BATCHING_SETTINGS
from inferlab.engines.labs.batching.trace import batching_trace_iteration
from inferlab.engines.labs.batching.trace_workload import trace_workload
from inferlab.engines.serve.traces.stats import trace_stats
from inferlab.engines.serve.traces.stream import read_trace, trace_format
from inferlab.views.batch_compare import variant_name
from inferlab.views.batching_view import BatchingView

AUTO_STEPS = 800
"""Iterations run when the lab is first shown (under a second on the simulated clock):
enough for the timeline to show arrivals, prefills and decodes interleaving."""


class BatchingLab(SteppedLab):
    lab_id = "batching"
    task_name = "Batching lab"
    defaults = BATCHING_DEFAULTS
    settings_table = BATCHING_SETTINGS
    auto_steps = AUTO_STEPS
    empty_snapshot_text = ("This snapshot holds no batching run.",
                           "Read-only snapshot: the batching lab had not run when it was taken.")

    def __init__(self, context, parent=None):
        super().__init__(context, BatchingView(), parent)
        self._trace_offset_s = 0.0
        self.comparison: list = []  # PolicyRuns of the last comparison (A, B)
        self.sweep_points: list = []  # SweepPoints of the last sweep
        self._live_compare: tuple = ([], [])  # kept while a snapshot is shown
        self.view.set_settings(self._settings)
        self.view.set_status("The lab starts its run when it is first shown.")
        self.view.compare.compare_requested.connect(self.compare)
        self.view.sweep.sweep_requested.connect(self.sweep)
        self.view.trace.open_requested.connect(self.open_trace)
        self.view.trace.replay_toggled.connect(self.replay_trace)
        self.trace_path: str | None = None  # the trace the Trace tab shows
        self.replaying = False  # the lab's run is on that trace's first requests
        self.replay_figures: dict = {}

    @property
    def requests(self) -> tuple:
        return self.header[0] if self.header is not None else ()

    @property
    def metrics(self) -> dict:
        return self.header[1] if self.header is not None else {}

    # ---- settings ----------------------------------------------------------------------------
    def valid_settings(self, s: dict) -> dict:
        if s["static_batch_size"] > s["max_num_seqs"]:
            s["static_batch_size"] = s["max_num_seqs"]
        return s

    # ---- the session -------------------------------------------------------------------------
    def preparing_text(self, settings: dict, device: str) -> str:
        where = (f"{settings['model_config']} on {settings['hardware']}, simulated"
                 if settings["clock"] == "simulated" else f"{settings['model']} on {device}")
        return f"Preparing {settings['requests']} requests ({where})…"

    def open_session(self, settings: dict, device: str, progress):
        if self.replaying:
            items, self.replay_figures = trace_workload(
                self.trace_path, settings, device, limit=settings["requests"],
                progress=progress)
            session = batching_session(dict(settings, requests=len(items)), device, items)
            self._trace_offset_s = self.context.recorder.now_s()
            return session
        progress(0.1, "generating the workload")
        session = batching_session(settings, device)
        self._trace_offset_s = self.context.recorder.now_s()
        return session

    def header_of(self, session):
        return session.request_infos(), session.metrics()

    def ready_text(self) -> str:
        s = self.session
        if s is None:
            return ""
        self._refresh_metrics()
        m = self.metrics
        clock = "simulated" if s.settings["clock"] == "simulated" else "wall clock"
        where = f"{s.model_id} on {s.device} ({clock}, {s.settings['policy']})"
        linears = f" {s.linears_note}" if s.linears_note else ""
        if self.replaying:
            f = self.replay_figures
            where += (f"; the first {f.get('trace_requests', 0):,} requests of "
                      f"{Path(self.trace_path).name} ({f.get('trace_format')}, unbounded-cache "
                      f"hit rate {f.get('trace_hit_rate_unbounded', 0.0):.0%})")
        if s.done:
            return (f"{where}: all {m.get('completed', 0)} requests finished after "
                    f"{m.get('iterations', 0)} iterations. Reset (Ctrl+R) to run it again."
                    + linears)
        return (f"{where}: iteration {s.step_index} next, {m.get('completed', 0)} of "
                f"{len(self.requests)} requests finished. Step (N) runs one iteration, "
                "Run (Space) runs to the end, Ctrl+R resets." + linears)

    def _refresh_metrics(self) -> None:
        """Between tasks (the worker is not stepping): the metrics of every record so far (a
        live session recomputes them at most every METRICS_EVERY_S while it runs)."""
        if self._running or self.header is None or self.read_only:
            return
        if self.metrics.get("iterations") != len(self.records):
            self.header = (self.requests, batching_metrics(self.session.serving_metrics(),
                                                           self.records,
                                                           self.session.prefix_hit_rate()))
            self._dirty = True

    def ended_text(self) -> str:
        return "Every request has finished: Reset (Ctrl+R) to run it again."

    # ---- comparison and sweep (whole runs in a worker, with progress) ---------------------------
    def compare(self, variants) -> None:
        settings, device = self.settings(), self.context.device_id
        differs = varied_keys([dict(settings, **v) for v in variants])
        names = [variant_name(dict(settings, **v), differs) for v in variants]
        what = (f"the same {settings['requests']} requests" if settings["scenario"] ==
                "lognormal" else f"the same {settings['scenario']} requests")

        def shown(runs) -> str:
            self.comparison = list(runs)
            self.view.compare.show_runs(runs)
            return f"{' vs '.join(names)}: {what} ({settings['clock']} clock)."

        self._whole_runs(
            self.view.compare, "compare",
            f"Running {' and '.join(names)} over {what}…",
            lambda progress, stop: compare_policies(settings, variants, device, progress, stop),
            shown)

    def sweep(self, low_per_s: float, high_per_s: float, n_rates: int) -> None:
        try:
            rates = sweep_rates(low_per_s, high_per_s, n_rates)
        except ValueError as e:
            self.view.sweep.set_busy(False, str(e))
            return
        settings, device = self.settings(), self.context.device_id
        policies = self.view.compare.variants()

        def shown(points) -> str:
            self.sweep_points = list(points)
            self.view.sweep.show_points(points, settings["slo_ttft_s"], settings["slo_tpot_s"])
            return (f"{len(points)} runs of {settings['requests']} requests each "
                    f"({settings['clock']} clock).")

        self._whole_runs(
            self.view.sweep, "rate sweep",
            f"Sweeping {n_rates} rates × {len(policies)} runs…",
            lambda progress, stop: rate_sweep(settings, rates, policies, device, progress, stop),
            shown)

    def open_trace(self, path: str) -> None:
        """Read a published trace's statistics in a worker (never on the GUI thread) and
        show them in the Trace tab."""
        name = Path(path).name

        def work(progress, stop):
            fmt = trace_format(path)
            progress(0.0, f"reading {name} ({fmt})")

            def read(n: int) -> None:
                check_stop(stop)
                progress(0.0, f"{n:,} requests of {name} read")

            return fmt, trace_stats(read_trace(path, fmt), read)

        def shown(result) -> str:
            fmt, stats = result
            self.trace_path = path
            self.view.trace.show_stats(stats, f"{name} ({fmt})")
            if self.replaying:
                self.reset()
            return f"{name}: {stats.requests:,} requests read."

        self._whole_runs(self.view.trace, "trace reading", f"Reading {name}…", work, shown)

    def replay_trace(self, on: bool) -> None:
        """The lab's run on the open trace's first requests (on), or the seeded workload."""
        self.replaying = on and self.trace_path is not None
        self.reset()

    def _whole_runs(self, view, name: str, busy_text: str, work, shown) -> None:
        """`work(progress, should_stop)` in a worker; `shown(result)` draws it and returns the
        status line. The tab's button is disabled meanwhile; a failure is said there."""
        view.set_busy(True, busy_text)
        self.run_task(f"Batching lab: {name}", work,
                      lambda result: view.set_busy(False, shown(result)),
                      lambda message: view.set_busy(False, f"{name.capitalize()} failed: "
                                                           f"{message}"),
                      on_end=lambda: view.set_busy(False))

    # ---- records ------------------------------------------------------------------------------
    def on_record(self, record) -> None:
        batching_trace_iteration(self.context.recorder, record, self._trace_offset_s)

    def draw(self, header, records) -> None:
        requests, metrics = header
        self.view.draw(requests, records, metrics)

    # ---- snapshots ------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        if self._task is None:  # no worker stepping the session now
            self._refresh_metrics()
        return batching_section(self.settings() | {"trace": self.trace_run()}, self.requests,
                                self.records, self.metrics,
                                comparison_state(self.comparison, self.sweep_points))

    def trace_run(self) -> dict | None:
        """The `trace` setting of the run shown: the open trace's first `requests` requests
        (its whole length, unscaled, unsampled) while the lab replays it, else None."""
        if not self.replaying or self.header is None:
            return None
        return {"path": self.trace_path, "format": self.replay_figures.get("trace_format"),
                "window": None, "time_scale": 1.0, "sample": None}

    def show_snapshot(self, snapshot: BatchingSnapshot) -> None:
        if not self.read_only:  # the live results come back with show_live
            self._live_compare = (self.comparison, self.sweep_points)
        super().show_snapshot(snapshot)
        self._show_compare(snapshot.comparison, snapshot.sweep, snapshot.settings)

    def show_live(self) -> None:
        super().show_live()
        self._show_compare(*self._live_compare, self._settings)

    def _show_compare(self, runs, points, settings: dict) -> None:
        self.comparison, self.sweep_points = list(runs), list(points)
        self.view.compare.show_runs(self.comparison)
        self.view.sweep.show_points(self.sweep_points, settings["slo_ttft_s"],
                                    settings["slo_tpot_s"])

    def replay_parts(self, snapshot: BatchingSnapshot):
        header = (snapshot.requests, snapshot.metrics) if snapshot.has_run else None
        return snapshot.settings, header, snapshot.iterations

    def replay_text(self, header, records) -> str:
        requests, metrics = header
        return (f"Read-only snapshot: {len(records)} iterations of {len(requests)} requests. "
                "Drag the iteration slider to replay them.")
