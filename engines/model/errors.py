"""The error every model loader raises for a file it cannot use."""

from __future__ import annotations


class ModelLoadError(ValueError):
    """A model file or folder that cannot be loaded; the message names the file and the problem."""
