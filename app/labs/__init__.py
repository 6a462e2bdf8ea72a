"""The labs. Each is described once, in `registry.LABS` (sidebar order); ids are used
everywhere: CLI, snapshots, settings.

What a new lab provides — and nothing else needs editing:

1. Its engine package, `engines/labs/<id>/` (Qt-free), named by the lab's id, holding all of
   the lab's engine-side concerns together (the mechanism packages, `engines/kv`, `serve`,
   `speculative`, `quant`, `mcu`, `board`, `endpoint`, …, hold none and never import
   `engines.labs`; the model cache every lab loads through is `engines/model/cache.py`):
   - its session (what steps the engines) and settings table,
   - its state records (frozen dataclasses with `to_dict` / `from_dict`),
   - `section.py`: `<id>_section(settings, ...) -> dict` (the snapshot's `labs.<id>`, built with
     `engines.trace.snapshot.lab_section`) and `read_<id>_section(section)` returning the
     records (ValueError naming the bad field; settings checked as the lab's inputs are),
   - optionally `run.py`: `add_arguments(parser)` and `run(args, recorder) -> (section,
     summary)` for `inferlab run <id>`, and a bench function `() -> dict` for `inferlab bench
     <id>` (figures as ratios against a baseline measured in the same run).
2. Its view(s) in `views/`: widgets that take records and draw them, nothing else.
3. Its controller, `app/labs/<id>.py`: a `Lab` subclass (`base.Lab`, or `stepped.SteppedLab`
   for a lab that steps an engine: worker, pause / step / run / speed, throttled drawing,
   history thinning, read-only replay). It builds the view, runs engine work through
   `Lab.run_task` (so `busy()` means the same on every lab: work this lab started is still
   running), and implements `snapshot_section` / `show_snapshot`.
4. One `LabSpec` entry in `registry.LABS`: id, title, summary, README description, the
   controller, the section reader, the run and bench functions, screenshot defaults.

The sidebar, the View menu's Ctrl+N shortcuts, `inferlab run|bench|screenshot`, snapshot
reading, `make screenshots` and the README's lab list (`registry.readme_lab_list`, checked by
a test) all come from that entry.
"""

from inferlab.app.labs.registry import LAB_IDS, LABS, LabSpec, lab_spec, resolve

__all__ = ["LABS", "LAB_IDS", "LabSpec", "lab_spec", "resolve"]
