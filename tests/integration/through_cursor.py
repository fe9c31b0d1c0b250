"""PyMySQL itself as the oracle of the wire reader: a connection seen without its socket, so a
question asked on it goes through PyMySQL's cursor (edges/question.py asks on the socket
whenever there is one)."""

from __future__ import annotations

from typing import Any


class ThroughCursor:
    """`conn` in every respect but its socket, which it does not show."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        # called only for what this object lacks: everything of the connection but its socket
        if name == "_sock":
            return None
        return getattr(self._conn, name)
