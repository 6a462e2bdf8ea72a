"""The roofline formula beside the plot, with the live values substituted."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from inferlab.engines.roofline.formulas import attainable_flops, bound, knee_intensity
from inferlab.engines.roofline.units import format_flops


class FormulaPanel(QLabel):
    """Shows attainable = min(P, I × B) for a roof, and for the hovered operation."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWordWrap(True)
        self.setMinimumWidth(260)
        self.setTextFormat(self.textFormat().RichText)
        self.setStyleSheet("QLabel { background: #fafafa; border: 1px solid #ddd; padding: 8px; }")
        self.setAlignment(self.alignment().AlignTop | self.alignment().AlignLeft)

    def draw(self, roof_label: str, peak_flops: float | None, bw_bytes_per_s: float | None,
               point=None) -> None:
        self.setText(formula_html(roof_label, peak_flops, bw_bytes_per_s, point))


def formula_html(roof_label, peak_flops, bw_bytes_per_s, point=None) -> str:
    head = ("<h3>Roofline</h3>"
            "<p><b>attainable = min(P, I × B)</b><br>"
            "I = FLOPs ÷ bytes moved<br>knee = P ÷ B</p>")
    if not peak_flops or not bw_bytes_per_s:
        return head + "<p><i>Measure the roofs (Hardware lab, or the button here) "\
                      "to see the numbers.</i></p>"
    knee = knee_intensity(peak_flops, bw_bytes_per_s)
    body = (f"<p><b>{roof_label}</b><br>"
            f"P = {format_flops(peak_flops)}<br>"
            f"B = {bw_bytes_per_s / 1e9:.1f} GB/s<br>"
            f"knee = {format_flops(peak_flops)} ÷ {bw_bytes_per_s / 1e9:.1f} GB/s "
            f"= <b>{knee:.3g} FLOP/byte</b></p>")
    if point is None:
        return head + body + "<p><i>Hover a point to substitute its numbers.</i></p>"
    i = point.intensity
    attainable = float(attainable_flops(peak_flops, bw_bytes_per_s, i))
    limit = bound(point.flops, point.bytes_moved, peak_flops, bw_bytes_per_s)
    kind = "measured" if point.measured else "predicted"
    body += (f"<p><b>{point.label}</b><br>"
             f"I = {point.flops:.3g} FLOP ÷ {point.bytes_moved:.3g} B = <b>{i:.3g} FLOP/byte</b><br>"
             f"attainable = min({format_flops(peak_flops)}, {i:.3g} × {bw_bytes_per_s / 1e9:.1f} GB/s)"
             f" = <b>{format_flops(attainable)}</b> ({limit}-bound)<br>"
             f"{kind}: {format_flops(point.flops_per_s)} "
             f"= {100 * point.flops_per_s / attainable:.0f}% of the roof</p>")
    return head + body
