"""Write a widget to PNG (raster) or SVG (vector) by the file's extension."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QPainter, QRegion
from PySide6.QtWidgets import QWidget

FORMATS = (".png", ".svg")


def _grab(widget: QWidget):
    """The widget as it looks now (a QPixmap); an unsized widget is given a size first."""
    if widget.size().isEmpty():
        widget.resize(QSize(1200, 780))
    return widget.grab()


def widget_png(widget: QWidget) -> bytes:
    """The widget as it looks now, as PNG bytes (the report's embedded images)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice

    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image = _grab(widget)
    if image.isNull() or not image.save(buffer, "PNG"):
        raise OSError("could not render the view as PNG")
    buffer.close()
    return bytes(data.data())


def export_widget(widget: QWidget, path: str | Path) -> Path:
    """Render `widget` as it looks now into `path` (.png or .svg)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"cannot export to {path.name!r}: use a .png or .svg file name")
    if suffix == ".png":
        image = _grab(widget)
        if image.isNull() or not image.save(str(path), "PNG"):
            raise OSError(f"could not write PNG to {path}")
        return path
    if widget.size().isEmpty():
        widget.resize(QSize(1200, 780))
    from PySide6.QtSvg import QSvgGenerator

    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(widget.size())
    generator.setViewBox(QRect(0, 0, widget.width(), widget.height()))
    generator.setTitle(widget.windowTitle() or "InferLab view")
    painter = QPainter()
    if not painter.begin(generator):
        raise OSError(f"could not write SVG to {path}")
    try:
        widget.render(painter, QPoint(0, 0), QRegion(widget.rect()), QWidget.RenderFlag.DrawChildren)
    finally:
        painter.end()
    return path
