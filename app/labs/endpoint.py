"""Serving endpoint lab: the user's own OpenAI-compatible server under the batching lab's
workload, every request timed from the client's side, the server's /metrics beside them.

Nothing is contacted until Run: the lab then reads its requests in a worker task (a trace
file with progress: `read_requests`, what `run endpoint` reads; a bad file or window is said
in the status line and the run on screen kept), then probes the URL and runs them
(engines/endpoint: `EndpointRun`) in a second one; the timeline redraws from the requests
finished so far four times a second. Stop cancels the run (every connection closed) and keeps
what finished. The sweep and the side-by-side table are worker tasks of their own.

The API key lives in the view's masked field (or the environment variable it names) and in
the run's client only: `settings()` never holds it, so neither QSettings, a snapshot, the
trace nor a log line can.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QTimer

from inferlab.app.labs.base import Lab
from inferlab.app.worker import file_reading, trace_status
from inferlab.engines.fields import clean_settings
from inferlab.engines.labs.endpoint.records import (
    AGREEMENT_KEYS,
    EndpointRecord,
    EndpointSnapshot,
)
from inferlab.engines.labs.endpoint.section import endpoint_section
from inferlab.engines.labs.endpoint.session import SweepPlan, live_record, load_run
from inferlab.engines.labs.endpoint.settings import (
    ENDPOINT_DEFAULTS,
    ENDPOINT_SETTINGS,
    check_endpoint_settings,
    run_requests,
    run_settings,
)
from inferlab.engines.labs.endpoint.side_by_side import compare_engines
from inferlab.engines.labs.endpoint.trace import endpoint_trace
from inferlab.views.endpoint_view import EndpointView

LIVE_DRAW_MS = 250


def read_requests(settings: dict, progress, should_stop) -> tuple[list, dict]:
    """(the run's requests, the trace's figures: {} without a published trace), read as
    `run endpoint` reads them, with the file's progress and stopped on request: a worker's
    job. ValueError (TraceError) naming the file when it cannot be read."""
    path = settings["trace_file"] or settings["workload_file"]
    if not path:
        return run_requests(settings)
    return run_requests(settings, file_reading(Path(path).name, progress, should_stop))


def idle_text(url: str) -> str:
    return (f"Idle: nothing has been contacted. Run probes {url} (/v1/models and one "
            "token), then sends the workload; only that URL is ever contacted.")


class EndpointLab(Lab):
    lab_id = "endpoint"
    needs_devices = False

    def __init__(self, context, parent=None):
        super().__init__(context, parent)
        self.view = EndpointView()
        self.widget = self.view
        self._settings = clean_settings(self.saved_settings(), ENDPOINT_SETTINGS,
                                        ENDPOINT_DEFAULTS)
        self._settings.pop("api_key", None)  # never a setting, whatever a file says
        self.record: EndpointRecord | None = None
        self.sweep_result = None
        self.side: dict | None = None
        self._live = (None, None, None)  # kept while a snapshot is shown
        self._run = None                 # the EndpointRun in flight
        self._trace_note = ""            # the status line's words on the run's trace
        self._task = None
        self._timer = QTimer(self)
        self._timer.setInterval(LIVE_DRAW_MS)
        self._timer.timeout.connect(self._draw_live)
        self.view.set_settings(self._settings)
        self.view.settings_changed.connect(self._on_settings)
        self.view.run_requested.connect(self.run)
        self.view.stop_requested.connect(self.stop)
        self.view.metrics.compare_requested.connect(self.compare)
        self.view.sweep.sweep_requested.connect(self.sweep)
        self.view.set_status(idle_text(self._settings["url"]))
        self._draw()

    def settings(self) -> dict:
        return dict(self._settings)

    def _on_settings(self, settings: dict) -> bool:
        """Take the view's settings, checked; False (said in the status line) when refused."""
        merged = dict(self._settings, **settings)
        try:
            self._settings = check_endpoint_settings(merged)
        except ValueError as e:
            self.view.set_status(f"Not accepted: {e}")
            return False
        self.save_settings()
        return True

    # ---- the key: the field, else the environment variable it names -----------------------
    def _key(self) -> str | None:
        typed = self.view.key_text().strip()
        if typed:
            return typed
        var = self._settings["api_key_env"]
        if var:
            value = os.environ.get(var)
            if not value:
                raise ValueError(f"the environment variable {var} is not set: type the key "
                                 "or clear the variable's name")
            return value
        return None

    # ---- a run ----------------------------------------------------------------------------------
    def run(self) -> None:
        """Read the requests in a worker, then (`_read_ended`) send them."""
        if self.read_only or self._task is not None or not self._on_settings(
                self.view.settings()):
            return
        s = self._settings
        try:
            key = self._key()
            run_settings(s)  # a bad URL or limit is said before any file is read
        except (ValueError, OSError) as e:
            self.view.set_status(f"Cannot run: {e}")
            return
        read: list = []  # the task's (requests, figures), or None when it failed

        def failed(message: str) -> None:
            read.append(None)
            self.view.set_status(f"Cannot run: {message}")

        self.view.set_running(True)
        self.view.set_status("Reading the workload…")
        self._task = self.run_task(
            "Endpoint lab: read the workload",
            lambda progress, should_stop: read_requests(s, progress, should_stop),
            read.append, failed, on_end=lambda: self._read_ended(s, key, read))
        self._task.progress.connect(self.view.set_progress)

    def _read_ended(self, s: dict, key: str | None, read: list) -> None:
        """The reading task is over: send what it read (nothing when it failed or was
        stopped: the run on screen stays)."""
        self._task = None
        if not read or read[0] is None or self.read_only:
            if not read and not self.read_only:
                self.view.set_status("Stopped before the run: nothing was sent.")
            self.view.set_running(False, self.read_only)
            return
        requests, figures = read[0]
        self._trace_note = trace_status(s["trace_file"], figures)
        try:
            run = load_run(s, key, requests=requests)
        except (ValueError, OSError) as e:
            self.view.set_running(False)
            self.view.set_status(f"Cannot run: {e}")
            return
        self._run, self.record, self.side = run, None, None
        total = len(run.requests)
        self.view.set_status(f"Probing {run.root}…")

        def work(progress, should_stop):
            run.start()
            while (result := run.wait(0.1)) is None:
                if should_stop():  # the window closes: cancel, and wait for the sockets
                    run.cancel()
                done = len(run.results_so_far())
                progress(done / max(total, 1), f"{done} of {total} requests done…")
            return result

        self._offset_s = self.context.recorder.now_s()
        self._task = self.run_task("Endpoint lab: run", work, self._finished, self._failed,
                                   on_end=self._ended)
        self._task.progress.connect(self.view.set_progress)
        self._timer.start()

    def stop(self) -> None:
        """Cancel the run in flight (its finished requests are kept), or the reading of its
        requests, or the sweep."""
        if self._run is not None:
            self._run.cancel()
        elif self._task is not None:
            self._task.stop()

    def _draw_live(self) -> None:
        run = self._run
        if run is None:
            return
        self.view.timeline.draw(live_record(run), "Waiting for the first request to finish…")

    def _finished(self, result) -> None:
        self.record = EndpointRecord.of(result)
        endpoint_trace(self.context.recorder, self.record, self._offset_s)
        m = self.record.metrics
        stopped = {"cancelled": " (stopped)", "max duration": " (time limit)"}.get(
            result.stopped or "", "")
        fails = ", ".join(f"{n} {k}" for k, n in sorted(self.record.failures.items()))
        self.view.set_status(
            f"{self.record.model} at {result.settings.url}{stopped}: {m['completed']} "
            f"completed, {m['failed']} failed{f' ({fails})' if fails else ''}, "
            f"{self.record.incomplete} cut off, {self.record.not_sent} not sent."
            + self._trace_note)
        self._draw()

    def _failed(self, message: str) -> None:
        self.view.set_status(f"Failed: {message}")

    def _ended(self) -> None:
        self._timer.stop()
        self._run, self._task = None, None
        self.view.set_running(False, self.read_only)

    # ---- sweep and side by side (whole runs in a worker) ---------------------------------------
    def sweep(self, n_rates: int) -> None:
        if self.read_only or self._task is not None:
            return
        self._on_settings(dict(self.view.settings(), sweep_rates=n_rates))
        s = self._settings
        try:
            key = self._key()
            plan = SweepPlan.of(s, n_rates)
        except ValueError as e:
            self.view.sweep.set_busy(False, f"Cannot sweep: {e}")
            return

        def work(progress, should_stop):
            return plan.run(key, progress, should_stop)

        def shown(sweep) -> None:
            self.sweep_result = sweep
            self.view.sweep.show_sweep(sweep, s["slo_ttft_s"], s["slo_tpot_s"])

        self._whole("rate sweep", self.view.sweep, "Sweeping…", work, shown)

    def compare(self) -> None:
        if self.read_only or self._task is not None:
            return
        record, s, device = self.record, self.settings(), self.context.device_id
        if record is None or not record.results:
            self.view.metrics.set_busy(False, "Run the workload against the server first.")
            return

        def work(progress, should_stop):
            return compare_engines(s, record, device, progress, should_stop)

        def shown(side) -> None:
            self.side = side
            self.view.metrics.show_side(side)

        self._whole("side by side", self.view.metrics,
                    f"Running the same {len(record.results)} requests through the in-app "
                    "engine and the simulated GPU…", work, shown)

    def _whole(self, name: str, panel, busy_text: str, work, shown) -> None:
        self.view.set_running(True)
        panel.set_busy(True, busy_text)

        def done(result) -> None:
            shown(result)  # the panel says what it shows
            panel.set_busy(False)

        self._task = self.run_task(f"Endpoint lab: {name}", work, done,
                                   lambda message: panel.set_busy(False, f"{name.capitalize()}"
                                                                  f" failed: {message}"),
                                   on_end=lambda: (self._ended(), panel.set_busy(False)))
        self._task.progress.connect(lambda f, m: self.view.set_progress(f, m))

    # ---- drawing and snapshots ----------------------------------------------------------------
    def _draw(self) -> None:
        r, s = self.record, self._settings
        self.view.timeline.draw(r, "No run yet: nothing has been contacted."
                                if not self.read_only else "This snapshot holds no run.")
        notes = [] if r is None else [r.scrape_note(), *r.notes]
        a = dict.fromkeys(AGREEMENT_KEYS) if r is None else r.agreement  # each key is there
        if a["server_output_tokens_per_s"] is not None \
                and a["client_output_tokens_per_s"] is not None:
            notes.append(f"Server's own counters: {a['server_output_tokens_per_s']:,.1f} "
                         f"output tok/s (client {a['client_output_tokens_per_s']:,.1f})" +
                         (f", mean TTFT {1e3 * a['server_ttft_mean_s']:,.1f} ms (client "
                          f"{1e3 * a['client_ttft_mean_s']:,.1f})"
                          if a["server_ttft_mean_s"] is not None
                          and a["client_ttft_mean_s"] is not None else ""))
        self.view.metrics.show_metrics(r.metrics if r is not None else {}, notes)
        self.view.metrics.show_side(self.side)
        self.view.sweep.show_sweep(self.sweep_result, s["slo_ttft_s"], s["slo_tpot_s"])

    def snapshot_section(self) -> dict:
        return endpoint_section(self.settings(), self.record, self.sweep_result, self.side)

    def show_snapshot(self, snapshot: EndpointSnapshot) -> None:
        settings, record = snapshot.settings, snapshot.run
        if not self.read_only:
            self._live = (self.record, self.sweep_result, self.side)
        self.stop()
        self.read_only = True
        self.record, self.sweep_result, self.side = record, snapshot.sweep, snapshot.side_by_side
        self.view.set_settings(settings)
        self.view.set_running(False, read_only=True)
        s = self._settings
        self._settings = settings
        self._draw()
        self._settings = s
        if record is None:
            self.view.set_status("Read-only snapshot: the endpoint lab had not run.")
        else:
            self.view.set_status(f"Read-only snapshot: {len(record.results)} requests to "
                                 f"{settings['url']} ({record.model}).")

    def show_live(self) -> None:
        super().show_live()
        self.record, self.sweep_result, self.side = self._live
        self.view.set_settings(self._settings)
        self.view.set_running(self._task is not None)
        self._draw()
        self.view.set_status(idle_text(self._settings["url"]) if self.record is None else
                             "Live: the last run.")

    def shutdown(self) -> None:
        self._timer.stop()
        self.stop()
