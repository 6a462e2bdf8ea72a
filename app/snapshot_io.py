"""Export and open snapshots from the window: gather every lab's section, restore them."""

from __future__ import annotations

from pathlib import Path

from inferlab.app import __version__
from inferlab.app.about import host_facts
from inferlab.engines.trace.snapshot import Snapshot, make_snapshot, read_snapshot, write_snapshot


def collect_snapshot(context, labs, active_lab: str | None) -> Snapshot:
    """Every lab's settings, state and metrics, plus the session's trace events."""
    return make_snapshot(
        app_version=__version__,
        host=host_facts(),
        devices=[d.to_dict() for d in context.devices],
        labs={lab.lab_id: lab.snapshot_section() for lab in labs},
        trace_events=context.recorder.events(),
        active_lab=active_lab,
    )


def save(path: str | Path, snapshot: Snapshot) -> Path:
    path = Path(path)
    if path.suffix.lower() != ".json":
        path = path.with_name(path.name + ".json")
    write_snapshot(path, snapshot)
    return path


def load(path: str | Path) -> Snapshot:
    """Read and validate (SnapshotError names the field)."""
    return read_snapshot(path)


def restore_labs(labs, snapshot: Snapshot) -> tuple[list[str], dict[str, str]]:
    """Show each lab's section read-only: (lab ids restored, {lab id: why it was not}).

    Every section is read once, by its lab's strict reader (settings, records, metrics,
    results: every field its view draws), into the lab's snapshot record before any view sees
    it; `show_snapshot` gets that record. A bad section is reported, its
    error naming the field (the banner shows it), and the others still open; a lab whose
    drawing refuses the section all the same (a ValueError) is reported the same way and
    goes back to live data. When none can be shown, ValueError says why and nothing on
    screen changes.
    """
    by_id = {lab.lab_id: lab for lab in labs}
    known = [lab_id for lab_id in snapshot.labs if lab_id in by_id]
    if not known:
        raise ValueError(f"the snapshot has no lab this InferLab shows (it has: "
                         f"{', '.join(snapshot.labs) or 'none'})")
    records, problems = read_sections([by_id[lab_id] for lab_id in known], snapshot)
    if not records:
        raise ValueError("; ".join(problems.values()))
    restored = []
    for lab_id, record in records.items():
        lab = by_id[lab_id]
        try:
            lab.show_snapshot(record)
        except ValueError as exc:
            problems[lab_id] = str(exc)
            if lab.read_only:
                lab.show_live()
        else:
            restored.append(lab_id)
    if not restored:
        raise ValueError("; ".join(problems.values()))
    return restored, problems


def read_sections(labs, snapshot: Snapshot) -> tuple[dict[str, object], dict[str, str]]:
    """Each lab's section read once (`Lab.read_section`, its registry reader) into the lab's
    frozen snapshot record: ({lab id: record}, {lab id: why its section does not read})."""
    records: dict[str, object] = {}
    problems: dict[str, str] = {}
    for lab in labs:
        try:
            records[lab.lab_id] = lab.read_section(snapshot.labs[lab.lab_id])
        except ValueError as exc:
            problems[lab.lab_id] = str(exc)
    return records, problems
