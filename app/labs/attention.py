"""Attention lab: one execution of attention (naive, tiled FlashAttention-2, split-K
Flash-Decoding) stepped tile by tile on seeded Q, K, V, every byte it moves counted, beside
the closed forms of all three, the roofline and timings on this device.

A stepped lab (`SteppedLab`): the session (engines/labs/attention/session.py) lives in worker
tasks only; each tile's frozen `AttentionStep` comes back through a queued signal; the view
is redrawn at most at the screen rate. The header is an `AttentionHeader`: the run's
`AttentionRunInfo` and the roofs it is placed on (this device's measured fp32 roof, once
measured, and an H100's datasheet fp32 roof).
"""

from __future__ import annotations

import dataclasses

from inferlab.app.labs.stepped import SteppedLab
from inferlab.engines.hardware.presets import load_hardware_preset
from inferlab.engines.labs.attention import bench as attention_bench
from inferlab.engines.labs.attention.records import AttentionSnapshot
from inferlab.engines.labs.attention.section import attention_section
from inferlab.engines.labs.attention.session import AttentionSession
from inferlab.engines.labs.attention.settings import ATTENTION_DEFAULTS, ATTENTION_SETTINGS
from inferlab.views.attention_view import AttentionHeader, AttentionView

AUTO_STEPS = 6
LIVE_ARRAY_STEPS = 256
"""Live records keep their score tile and m, ℓ rows for the latest this many steps only: a
16k-token run has 65,536 tiles of 64×64 scores (1 GiB)."""
GPU_PRESET = "h100-sxm"


def gpu_roof() -> tuple:
    """An H100's datasheet fp32 roof: every run is placed on it (label, peak FLOP/s,
    bandwidth bytes/s, measured)."""
    p = load_hardware_preset(GPU_PRESET)
    return (f"{p.name.removeprefix('NVIDIA ').split(' 80GB')[0]} fp32 (datasheet)",
            p.peak_flops_for("fp32"), p.bandwidth_bytes_per_s, False)


class AttentionLab(SteppedLab):
    lab_id = "attention"
    task_name = "Attention lab"
    defaults = ATTENTION_DEFAULTS
    settings_table = ATTENTION_SETTINGS
    auto_steps = AUTO_STEPS
    empty_snapshot_text = ("This snapshot holds no attention run.",
                           "Read-only snapshot: the attention lab had not run when it was "
                           "taken.")

    def __init__(self, context, parent=None):
        super().__init__(context, AttentionView(), parent)
        self.timing_rows: list[dict] = []
        self._timing_task = None
        self.view.set_settings(self._settings)
        self.view.timings.measure_requested.connect(self.measure_timings)
        context.roofs_changed.connect(self._on_roofs_changed)
        self.view.set_status("The lab steps its first tiles when it is first shown.")

    # ---- the session -------------------------------------------------------------------------
    def open_session(self, settings: dict, device: str, progress):
        source = settings.get("source", "seeded")
        progress(0.1, "seeding Q, K, V" if source == "seeded" else
                 f"running {source} to layer {settings['layer']} on the shipped texts")
        return AttentionSession(settings, device)

    def preparing_text(self, settings: dict, device: str) -> str:
        if settings.get("source", "seeded") == "seeded":
            return "Seeding Q, K, V…"
        return (f"Loading {settings['source']} and running it to layer {settings['layer']} "
                f"on {device}…")

    def roofs(self) -> tuple:
        measured = self.context.roofs("cpu")
        mine = () if measured is None or "fp32" not in measured.peak_flops else (
            ("this CPU fp32 (measured)", measured.peak_flops["fp32"], measured.bw_bytes_per_s,
             True),)
        return (*mine, gpu_roof())

    def _on_roofs_changed(self, device: str) -> None:
        """The Hardware lab measured this CPU: place the run on its roof too."""
        if device == "cpu" and self.header is not None and not self.read_only:
            self.header = AttentionHeader(self.header.info, self.roofs())
            self.flush()

    def header_of(self, session):
        return AttentionHeader(session.info, self.roofs())

    def draw(self, header, records) -> None:
        self.view.draw(header, records)

    def ready_text(self) -> str:
        s = self.session
        if s is None:
            return ""
        e = s.engine
        if s.done:
            return (f"All {e.steps_total:,} tiles done: {e.bytes_read:,} bytes read, "
                    f"{e.bytes_written:,} written (the closed form's exactly); max |O − SDPA| "
                    f"= {s.max_abs_error_vs_sdpa():.2g}. Reset (Ctrl+R) to run it again.")
        return (f"{s.info.source}. {e.execution}: tile {e.step_index + 1:,} of "
                f"{e.steps_total:,} next. Step (N) runs one tile, Run (Space) runs to the end, "
                "Ctrl+R resets.")

    def thin_history(self) -> None:
        i = len(self.records) - 1 - LIVE_ARRAY_STEPS
        if i >= 0 and self.records[i].score_tile is not None:
            self.records[i] = dataclasses.replace(self.records[i], score_tile=None,
                                                  m_rows=None, l_rows=None)

    # ---- timings on this device ------------------------------------------------------------------
    def measure_timings(self) -> None:
        if self._timing_task is not None or self.read_only:
            return
        panel = self.view.timings
        device = self.context.device_id
        panel.set_busy(True, f"Timing naive, SDPA and the tiled kernels on {device}…")

        def work(progress, should_stop):
            # through the module, read at call time: tests give it their own timings
            return attention_bench.timings(progress=progress, device=device)

        def done(rows) -> None:
            self.timing_rows = rows
            panel.draw(rows)

        def ended() -> None:
            self._timing_task = None
            panel.set_busy(self.read_only, panel.note.text())

        self._timing_task = self.run_task("Attention lab: timings", work, done,
                                          lambda m: panel.set_busy(False, f"failed: {m}"),
                                          on_end=ended)

    # ---- snapshots ---------------------------------------------------------------------------------
    def snapshot_section(self) -> dict:
        info = self.header.info if self.header is not None else None
        roofs = self.header.roofs if self.header is not None else ()
        return attention_section(self.settings(), info, self.records, self.timing_rows, roofs)

    def replay_parts(self, record: AttentionSnapshot):
        self.view.timings.draw(record.timings)
        header = (AttentionHeader(record.run, record.roofs or (gpu_roof(),))
                  if record.run is not None else None)
        return record.settings, header, list(record.steps)

    def replay_text(self, header, records) -> str:
        i = header.info
        return (f"Read-only snapshot: {len(records):,} tiles of {i.execution} attention, "
                f"N = {i.n}, d = {i.d}. Drag the step slider to replay them.")

