"""The error every speculative-decoding function raises for input it cannot use."""

from __future__ import annotations


class SpeculativeError(ValueError):
    """Bad input to the speculative engine; the message names the parameter and the problem."""
