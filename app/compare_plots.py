"""The labs' plots of a snapshot comparison, A and B overlaid (engines.trace.overlay).

For each lab both snapshots hold whose registry entry names `compare_plots`, both sections
are read back by the entry's own reader and turned into plots by its `compare_plots`, then
paired by title. A lab whose section does not read, on either side, gets a message naming
the side and the field instead of plots; a lab without `compare_plots` gets nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt

from inferlab.app.export import widget_png
from inferlab.app.gui import create_application
from inferlab.app.labs import registry
from inferlab.app.labs.registry import resolve
from inferlab.app.offscreen import ensure_platform, process_events_for
from inferlab.engines.trace.overlay import LabOverlay, overlay
from inferlab.engines.trace.snapshot import Snapshot


def lab_overlays(a: Snapshot, b: Snapshot, labs: Sequence[str], a_name: str = "A",
                 b_name: str = "B") -> list[LabOverlay]:
    """One LabOverlay per lab of `labs` (those both hold: Comparison.labs) that describes
    its plots, in that order."""
    specs = {spec.id: spec for spec in registry.LABS}  # read at call time: tests add labs
    out = []
    for lab in labs:
        spec = specs.get(lab)
        if spec is None or spec.compare_plots is None:
            continue
        read, plots_of = resolve(spec.read_section), resolve(spec.compare_plots)
        sides = []
        for side, name, snapshot in (("A", a_name, a), ("B", b_name, b)):
            try:
                sides.append(plots_of(read(snapshot.labs[lab])))
            except ValueError as exc:
                sides.append(f"{side} ({name}): {exc}")
        problems = [s for s in sides if isinstance(s, str)]
        if problems:
            out.append(LabOverlay(lab, message="cannot draw: " + "; ".join(problems)))
            continue
        try:
            plots = overlay(*sides)
        except ValueError as exc:
            out.append(LabOverlay(lab, message=f"cannot draw: {exc}"))
            continue
        out.append(LabOverlay(lab, plots, "" if plots else
                              "nothing to draw: neither snapshot holds a run of this lab"))
    return out


def overlay_pngs(overlays: Sequence[LabOverlay], a_name: str = "A", b_name: str = "B",
                 width_px: int = 1200) -> dict[str, bytes | str]:
    """Lab id -> its overlaid plots as one PNG (rendered offscreen where there is no
    screen; headed by which file is A and which B), or the message why it has none: the
    report's images."""
    # pyqtgraph (under the overlay plots) is imported when a report is made, not when the
    # window that can make one starts
    from inferlab.views.overlay_plots import PLOT_HEIGHT_PX, LabOverlayPlots, sides_html

    ensure_platform()
    create_application()
    out: dict[str, bytes | str] = {}
    for lab in overlays:
        if not lab.plots:
            out[lab.lab] = lab.message
            continue
        widget = LabOverlayPlots(lab, sides_html(a_name, b_name))
        widget.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
        try:  # shown (off the screen) and laid out: axes make room for their tick labels
            widget.resize(width_px, 30 + widget.rows() * (PLOT_HEIGHT_PX + 20))
            widget.show()
            process_events_for(0.1)
            out[lab.lab] = widget_png(widget)
        finally:
            widget.close()
            widget.deleteLater()
    return out
