"""The error every quantizer raises for input it cannot quantize."""

from __future__ import annotations


class QuantError(ValueError):
    """Bad quantizer input; the message names the parameter and what is wrong with it."""
