"""The labs. Each is described once, in `registry.LABS` (sidebar order); ids are used
everywhere: CLI, snapshots, settings.

What a new lab provides — and nothing else needs editing:

1. Its engine package, `engines/labs/<id>/` (Qt-free), named by the lab's id, holding all of
   the lab's engine-side concerns together (the mechanism packages, `engines/kv`, `serve`,
   `speculative`, `quant`, `mcu`, `board`, `endpoint`, …, hold none and never import
   `engines.labs`; the model cache every lab loads through is `engines/model/cache.py`). The
   same files in every lab (tests/engines/labs/test_lab_layout.py checks them):
   - `settings.py`: the `Setting` table, defaults and `check_<id>_settings` (the lab's
     inputs, remembered settings and a snapshot's settings all go through it);
   - `records.py`: frozen state records, and `<Id>Snapshot`, the one frozen record a
     snapshot's section is read into: everything the view draws from it;
   - `session.py`: what steps or computes the engines (the controller's worker and the
     headless run both drive it);
   - `section.py`: only `<id>_section(settings, ...) -> dict` (the snapshot's `labs.<id>`,
     built with `engines.trace.snapshot.lab_section`) and `read_<id>_section(section) ->
     <Id>Snapshot` (ValueError naming the bad field's path);
   - `run.py`: `add_arguments(parser)` and `run(args, recorder) -> (section, summary)` for
     `inferlab run <id>`;
   - `bench.py`: the figures of `inferlab bench <id>` (ratios against a baseline measured
     in the same run). Only a view's own timings (a redraw, a render) stay app-side, in
     `app/benches/<id>_view.py`, named by the entry's `view_bench`;
   - and what is the lab's own beside them (`formulas.py`, `compare_plots.py`, `trace.py`,
     scenarios, timelines).
2. Its view(s) in `views/`: widgets that take records and draw them, nothing else.
3. Its controller, `app/labs/<id>.py`: a `Lab` subclass (`base.Lab`, or `stepped.SteppedLab`
   for a lab that steps an engine: worker, pause / step / run / speed, throttled drawing,
   history thinning, read-only replay). It builds the view, runs engine work through
   `Lab.run_task` (so `busy()` means the same on every lab: work this lab started is still
   running), and implements `snapshot_section` / `show_snapshot(record)` (the record its
   section reader made: a snapshot's section is read once, `snapshot_io.restore_labs`).
4. One `LabSpec` entry in `registry.LABS`: id, title, summary, README description, the
   controller, the section reader, the run and bench functions (and view timings),
   screenshot defaults.

The sidebar, the View menu's Ctrl+N shortcuts, `inferlab run|bench|screenshot`, snapshot
reading, `make screenshots` and the README's lab list (`registry.readme_lab_list`, checked by
a test) all come from that entry.
"""

from inferlab.app.labs.registry import LAB_IDS, LABS, LabSpec, lab_spec, resolve

__all__ = ["LABS", "LAB_IDS", "LabSpec", "lab_spec", "resolve"]
