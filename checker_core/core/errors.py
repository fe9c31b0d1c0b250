"""What the tool refuses to act on: one base, one outcome (exit code 2, nothing changed)."""

from __future__ import annotations


class BadInput(ValueError):
    """Input the tool will not act on: a row, an argument, a setting it cannot use. The message
    names the row or the key; whoever catches it reports `bad input` and changes nothing."""
