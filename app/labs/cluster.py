"""Cluster lab: many simulated GPUs — replicas behind a router, tensor parallelism, prefill /
decode disaggregation with the KV moved over a link — run to the end on the simulated clock,
drawn as one lane per instance and one for the link, with goodput per GPU and a layout search.

A whole run (or a whole search) is one worker task (a ClusterSession); what it hands back is
the snapshot section, read once into a ClusterSnapshot and drawn from that record, so a live
run and a snapshot are drawn the same way.

With a published trace set in the form (the `trace` setting), a run or a search reads the
trace's window in its worker first (settings.cluster_trace, as `run cluster --trace` reads
it) and runs its requests; a file that cannot be read is said in the status line, the last
run kept."""

from __future__ import annotations

from pathlib import Path

from inferlab.app.labs.base import Lab
from inferlab.app.worker import file_reading, trace_status
from inferlab.engines.cluster.fanout import choose_fanout
from inferlab.engines.fields import clean_settings
from inferlab.engines.labs.cluster.records import ClusterSnapshot, search_summary
from inferlab.engines.labs.cluster.section import cluster_section, read_cluster_section
from inferlab.engines.labs.cluster.session import ClusterSession
from inferlab.engines.labs.cluster.settings import (
    CLUSTER_DEFAULTS,
    CLUSTER_SETTINGS,
    check_cluster_settings,
    cluster_trace,
)
from inferlab.engines.labs.cluster.trace import trace_cluster
from inferlab.engines.trace.snapshot import lab_section
from inferlab.views.cluster_view import ClusterView


def read_trace(settings: dict, progress, should_stop) -> tuple[list | None, dict, dict]:
    """(items, figures, settings) of the settings' trace (settings.cluster_trace), read with
    progress and stopped on request; (None, {}, settings) without one."""
    if settings["trace"] is None:
        return None, {}, settings
    name = Path(settings["trace"]["path"]).name
    return cluster_trace(settings, file_reading(name, progress, should_stop, share=0.05))


def run_section(settings: dict, progress, should_stop, recorder=None) -> tuple[dict, dict]:
    """(the run of `settings` to its end as the snapshot's section, the trace's figures: {}
    without a trace): a worker's job."""
    items, figures, settings = read_trace(settings, progress, should_stop)
    progress(0.05, "generating the requests")
    session = ClusterSession(settings, items)
    progress(0.2, f"routing {len(session.requests)} requests through "
                  f"{session.config.layout.label}")
    result = session.run(lambda fraction, message: progress(0.2 + 0.8 * fraction, message))
    peak = None
    if settings["autoscale"]:  # the fixed fleet it is judged against: a few more runs
        # the worker's progress takes a number: the run is done, the fleet's runs go on
        peak = session.peak_fleet(lambda _fraction, message: progress(1.0, message))
    if recorder is not None:
        trace_cluster(recorder, result, recorder.now_s())
    return cluster_section(settings, result, peak=peak), figures


def search_section(settings: dict, kind: str, progress, should_stop) -> tuple[dict, dict]:
    """Every layout of `kind` on settings' GPUs (one run each), as a section with the grid:
    the probes as Ray tasks on a local Ray (127.0.0.1, this machine's cores) where ray is
    installed, else serially; the progress counts the probes done. With the trace's figures,
    as `run_section`."""
    items, figures, settings = read_trace(settings, progress, should_stop)
    result = ClusterSession(settings, items).search(kind, progress, choose_fanout())
    return cluster_section(settings, None, search_summary(result)), figures


def trace_path(settings: dict) -> str:
    """The file of the settings' trace ("" without one)."""
    return settings["trace"]["path"] if settings["trace"] else ""


class ClusterLab(Lab):
    lab_id = "cluster"
    needs_devices = False  # simulated GPUs: nothing of this machine's

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = ClusterView(CLUSTER_SETTINGS)
        self.widget = self.view
        saved = dict(self.saved_settings(), trace=None)  # a trace is chosen anew each time
        self._settings = self._checked(clean_settings(saved, CLUSTER_SETTINGS,
                                                      CLUSTER_DEFAULTS))
        self.view.set_settings(self._settings)
        self.run_section: dict | None = None  # the last run's section, as exported
        self.run_record: ClusterSnapshot | None = None  # the same, read once: drawn
        self.search: dict | None = None  # the last search's summary
        self._live = (None, None, None)  # kept while a snapshot is shown
        self._started = False
        self.view.run_requested.connect(self.run)
        self.view.search_requested.connect(self.search_layouts)
        self.view.set_busy(False, "The lab runs the default cluster when it is first shown.")

    @staticmethod
    def _checked(settings: dict) -> dict:
        try:
            return check_cluster_settings(settings)
        except ValueError:  # a remembered layout that no longer adds up
            return dict(CLUSTER_DEFAULTS)

    def activated(self) -> None:
        if not self._started and not self.read_only:
            self._started = True
            self.run()

    # ---- settings ----------------------------------------------------------------------
    def settings(self) -> dict:
        return dict(self._settings)

    def _take_view_settings(self) -> bool:
        """The view's choices, checked; False (said in the status line) when they do not add
        up (GPUs that do not split into the layout)."""
        try:
            self._settings = check_cluster_settings(dict(self._settings,
                                                         **self.view.settings()))
        except ValueError as e:
            self.view.set_busy(False, str(e).removeprefix("settings."))
            return False
        self.save_settings()
        return True

    # ---- work --------------------------------------------------------------------------
    def run(self) -> None:
        if self.read_only or self.busy() or not self._take_view_settings():
            return
        settings, recorder = self.settings(), self.context.recorder
        self.view.set_busy(True, "Running the cluster on the simulated clock…")
        self.run_task("Cluster lab: run",
                      lambda progress, stop: run_section(settings, progress, stop, recorder),
                      self._show_run, self._failed, on_end=lambda: self.view.set_busy(False))

    def search_layouts(self, kind: str) -> None:
        if self.read_only or self.busy() or not self._take_view_settings():
            return
        settings = self.settings()
        self.view.set_busy(True, f"Searching {kind} layouts on {settings['gpus']} GPUs, one "
                                 "full run each…")
        self.run_task("Cluster lab: layout search",
                      lambda progress, stop: search_section(settings, kind, progress, stop),
                      self._show_search, self._failed,
                      on_end=lambda: self.view.set_busy(False))

    def _failed(self, message: str) -> None:
        self.view.set_busy(False, f"The run failed: {message}")

    def _show_run(self, result: tuple[dict, dict]) -> None:
        section, figures = result
        record = read_cluster_section(section)
        self.run_section, self.run_record = section, record
        metrics = record.metrics
        self._draw(record)
        self.view.set_busy(False, f"{metrics.get('layout', '')}: {metrics.get('completed', 0)} "
                                  f"requests in {metrics.get('duration_s', 0):.2f} simulated "
                                  "s. Change the layout and Run again, or Search layouts."
                                  + trace_status(trace_path(record.settings), figures))

    def _draw(self, record: ClusterSnapshot) -> None:
        self.view.draw(record.state, record.metrics, record.settings)

    def _show_search(self, result: tuple[dict, dict]) -> None:
        section, figures = result
        searched = read_cluster_section(section)
        search = searched.search
        self.search = search
        self.view.show_search(search)
        best = search.get("best") or "no layout meets the SLOs"
        where = f" ({search['executor']})" if search.get("executor") else ""
        self.view.set_busy(False, f"{len(search['cells'])} layouts searched{where}; best: "
                                  f"{best}." + trace_status(trace_path(searched.settings), figures))

    # ---- snapshots ---------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        run = self.run_section or lab_section(self.settings(), {}, {})
        state = dict(run["state"])
        if self.search is not None:
            state["search"] = self.search
        return {"settings": run["settings"], "state": state, "metrics": run["metrics"]}

    def show_snapshot(self, record: ClusterSnapshot) -> None:
        if not self.read_only:
            self._live = (self.run_section, self.run_record, self.search)
        super().show_snapshot(record)
        self.view.set_read_only(True)
        self.view.set_settings(record.settings)
        self._draw(record)
        self.view.show_search(record.search)
        trace = record.settings["trace"]
        on = "" if trace is None else f" of a run on the trace {Path(trace['path']).name}"
        self.view.status.setText(f"Read-only snapshot{on}." if record.state is not None else
                                 "Read-only snapshot: it holds no cluster run.")

    def show_live(self) -> None:
        super().show_live()
        self.view.set_read_only(False)
        self.run_section, self.run_record, self.search = self._live
        self.view.set_settings(self._settings)
        if self.run_record is not None:
            self._draw(self.run_record)
        else:
            self.view.draw(None, {}, self._settings)
        self.view.show_search(self.search)
