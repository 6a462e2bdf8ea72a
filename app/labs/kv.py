"""KV lab: a scenario's requests run by the real model through the paged KV cache, step by
step, with the contiguous allocator on the same requests beside it.

A stepped lab (`SteppedLab`): the session (engines/labs/kv) lives in worker tasks only; each
step's frozen record comes back through a queued signal; the view is redrawn at most at the
screen rate. The header drawn beside the records is (KVRunInfo, SeqInfo tuple).

A published trace (the `trace` setting, chosen in the line under the controls) runs in place
of the scenario as `run kv --trace` runs it: the file's window is read in a worker first
(trace_scenario.read_kv_trace), and only once it has been read does the lab reset onto it
(trace_scenario.trace_scenario with the model's vocabulary), so a file that cannot be read is
said in the status line and the run on screen stays.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from inferlab.app.labs.stepped import SteppedLab
from inferlab.app.worker import file_reading
from inferlab.engines.labs.kv.metrics import kv_metrics
from inferlab.engines.labs.kv.records import KVSnapshot
from inferlab.engines.labs.kv.scenarios import SCENARIOS
from inferlab.engines.labs.kv.section import kv_section
from inferlab.engines.labs.kv.session import kv_lab_model, kv_session
from inferlab.engines.labs.kv.settings import KV_DEFAULTS, KV_SETTINGS
from inferlab.engines.labs.kv.trace import kv_trace_step
from inferlab.engines.labs.kv.trace_scenario import TRACE_SCENARIO, read_kv_trace, trace_scenario
from inferlab.engines.model.cache import AUTO, model_choices, resolve_model_name
from inferlab.engines.trace.thinning import keep_every
from inferlab.views.kv_view import KVView

LIVE_POOL_CELLS_LIMIT = 4_000_000
"""Live records keep every step's pool state up to this many cells in all (a 100k-block
pool: 40 steps), then every k-th step's: memory stays bounded however long a run goes."""
AUTO_STEPS = 6
"""Steps run when the lab is first shown, so it opens on something to look at."""


def read_trace(trace: dict, progress, should_stop) -> tuple[dict, list, dict]:
    """(the trace setting with the format read, the requests a model can run, the figures)
    of a checked `trace` setting's file: `run kv --trace`'s reading (window, time scale,
    seeded sample, lengths × length_scale), stopped on request."""
    return read_kv_trace(trace, file_reading(Path(trace["path"]).name, progress, should_stop))


class KVLab(SteppedLab):
    lab_id = "kv"
    task_name = "KV lab"
    defaults = KV_DEFAULTS
    settings_table = KV_SETTINGS
    auto_steps = AUTO_STEPS
    empty_snapshot_text = ("This snapshot holds no KV run.",
                           "Read-only snapshot: the KV lab had not run when it was taken.")

    def __init__(self, context, parent=None):
        super().__init__(context, KVView(), parent)
        self._settings["trace"] = None  # a trace is chosen anew each time
        self.trace_read: tuple | None = None  # (trace setting, kept requests, figures)
        self.view.trace_requested.connect(self.set_trace)
        models = [(AUTO, f"auto ({resolve_model_name(AUTO)})"), *model_choices()]
        self.view.set_choices([(s.name, s.title, s.description) for s in SCENARIOS.values()],
                              models)
        self.view.set_settings(self._settings)
        self.view.set_status("The lab loads its model when it is first shown.")

    # ---- the header: what the view draws beside the records ------------------------------------
    @property
    def info(self):
        return self.header[0] if self.header is not None else None

    @property
    def seq_infos(self) -> tuple:
        return self.header[1] if self.header is not None else ()

    # ---- settings ----------------------------------------------------------------------------
    def valid_settings(self, s: dict) -> dict:
        if s.get("scenario") not in SCENARIOS:
            s["scenario"] = KV_DEFAULTS["scenario"]
        if self.context.quick and "model" not in self.saved_settings():
            s["model"] = "tiny"  # tests and quick renders: no 100 MB model
        for key, low in (("block_size", 1), ("n_blocks", 0)):
            try:
                s[key] = max(low, int(s.get(key, KV_DEFAULTS[key])))
            except (TypeError, ValueError, OverflowError):
                s[key] = KV_DEFAULTS[key]
        return s

    def on_settings_changed(self, changed: set) -> None:
        # a new scenario is one click: reset and run it; other changes reset to step 0
        self.reset(run="scenario" in changed)

    # ---- a published trace in place of the scenario --------------------------------------------
    def set_trace(self, trace: dict | None) -> None:
        """Run `trace` (the view's trace setting, unchecked) once its file has been read in a
        worker, or the scenario again (None). A trace that cannot be read is said; the run
        and the trace on screen stay."""
        if self.read_only:
            return
        if trace is None:
            if self._settings["trace"] is not None:
                self._settings["trace"], self.trace_read = None, None
                self.view.show_trace(None)
                self.reset()
            return
        try:
            trace = KV_SETTINGS["trace"].check(trace, "trace")
        except ValueError as e:
            self._refused(str(e))
            return
        if self._task is not None:  # first the step or run in progress ends
            self._after_task = lambda: self.set_trace(trace)
            self._pause.set()
            self._task.stop()
            return
        read: list = []

        def adopt(result) -> None:
            read.append(result)
            self.trace_read = result
            self._settings["trace"] = result[0]
            self.view.show_trace(result[0])
            self._after_task = self.reset  # once this task has ended

        def ended() -> None:
            if not read:  # failed or stopped: the form shows what runs
                self.view.show_trace(self._settings["trace"])

        self.view.set_status(f"Reading {Path(trace['path']).name}…")
        self._start(f"{self._name()}: read trace",
                    lambda progress, stop: read_trace(trace, progress, stop), adopt,
                    on_end=ended)

    def _refused(self, message: str) -> None:
        self.view.set_status(f"{self._name()}: {message}", error=True)
        self.view.show_trace(self._settings["trace"])

    # ---- the session -------------------------------------------------------------------------
    def preparing_text(self, settings: dict, device: str) -> str:
        name = resolve_model_name(settings["model"])
        what = (f"“{SCENARIOS[settings['scenario']].title}”" if settings["trace"] is None
                else f"the trace {Path(settings['trace']['path']).name}")
        return f"Loading {name} on {device} and preparing {what}…"

    def open_session(self, settings: dict, device: str, progress):
        progress(0.05, f"loading {resolve_model_name(settings['model'])}")
        model, tokenizer = kv_lab_model(settings, device)
        trace, scenario = settings["trace"], None
        if trace is not None:  # read already (set_trace): its requests on this model's tokens
            progress(0.5, "making the trace's prompts")
            _, kept, _ = self.trace_read
            scenario = trace_scenario(kept, Path(trace["path"]).name, model.config.vocab_size,
                                      settings["block_size"], settings["n_blocks"] or None,
                                      trace["step_s"])
        else:
            progress(0.5, "tokenizing the scenario's requests")
        return kv_session(settings, model, tokenizer, scenario)

    def header_of(self, session):
        return session.info, session.seq_infos()

    def prepared(self, first: bool) -> None:
        """On the lab's first opening, select a sequence a prefix hit served, to show what a
        selection highlights."""
        if self.session is not None:  # the tree's hover shows a node's tokens as text
            self.view.tree.decode = self.session.tokenizer.decode
        if first and self.records:
            hit = next((q.seq_id for q in self.records[-1].seqs
                        if q.n_cached and q.status == "running"), None)
            if hit is not None:
                self.view.select(hit)

    def ready_text(self) -> str:
        s = self.session
        if s is None:
            return ""
        if s.done:
            m = kv_metrics(self.records)
            return (f"Finished after {m['steps']} steps: {m['finished']} sequences done, "
                    f"{m['refused']} refused, {m['preemptions']} preemptions, "
                    f"{m['cow_copies']} copy-on-write copies{self._trace_text()}. Reset "
                    "(Ctrl+R) to run it again.")
        return (f"{s.info.model_id} on {s.info.device}{self._trace_text()}: step "
                f"{s.step_index} next. Step (N) runs one engine step, Run (Space) runs to the "
                "end, Ctrl+R resets.")

    def _trace_text(self) -> str:
        """Which trace runs, its format, requests and unbounded-cache hit rate ("" if none)."""
        if self.session is None or self.session.info.scenario != TRACE_SCENARIO:
            return ""
        trace, _, f = self.trace_read
        return (f"; the {f['trace_requests']:,} requests of {Path(trace['path']).name} "
                f"({f['trace_format']}, unbounded-cache hit rate "
                f"{f['trace_hit_rate_unbounded']:.0%})")

    def ended_text(self) -> str:
        return "The scenario has ended: Reset (Ctrl+R) to run it again."

    # ---- records ------------------------------------------------------------------------------
    def on_record(self, record) -> None:
        kv_trace_step(self.context.recorder, record)

    def thin_history(self) -> None:
        """Drop the previous record's pool state unless it is a k-th step (big pools only)."""
        n = len(self.records)
        every = keep_every(n, self.info.n_blocks, LIVE_POOL_CELLS_LIMIT)
        prev = n - 2
        if every > 1 and prev > 0 and prev % every and self.records[prev].pool is not None:
            self.records[prev] = dataclasses.replace(self.records[prev], pool=None)

    def draw(self, header, records) -> None:
        info, seq_infos = header
        self.view.draw(info, seq_infos, records)

    # ---- snapshots ------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        return kv_section(self.settings(), self.info, self.seq_infos, self.records)

    def replay_parts(self, record: KVSnapshot):
        header = (record.run, record.sequences) if record.run is not None else None
        return record.settings, header, list(record.steps)

    def replay_text(self, header, records) -> str:
        info, _seq_infos = header
        return (f"Read-only snapshot: {len(records)} steps of “{info.scenario_title}” on "
                f"{info.model_id}. Drag the step slider to replay them.")
