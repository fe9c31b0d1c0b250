"""Log lines: stable field names, and the lean JSON writer equal to structlog's output."""

from __future__ import annotations

import io
import json
from typing import Any

from checker_core.logs import JsonLines, get_logger


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def emit(log: Any) -> None:
    log = log.bind(cluster="main")
    log.debug("node", pass_id="ab12", node="127.0.0.1:3311", verdict="healthy", reason="synced")
    log.info("pass", pass_id="ab12", duration_ms=3.2, change=["add x"], verdicts={"healthy": 3})
    log.warning("state", reason="unreadable")


def test_lean_writer_matches_structlog() -> None:
    lean, full = io.StringIO(), io.StringIO()
    emit(get_logger("json", "debug", lean=True, stream=lean, checker="galera"))
    emit(get_logger("json", "debug", lean=False, stream=full, checker="galera"))
    a, b = lines(lean), lines(full)
    assert len(a) == len(b) == 3
    for x, y in zip(a, b, strict=True):
        assert list(x) == list(y)  # same fields, same order
        x.pop("ts"), y.pop("ts")
        assert x == y


def test_field_names_are_stable() -> None:
    out = io.StringIO()
    emit(JsonLines(out, 10, {"checker": "galera"}))
    node, summary, state = lines(out)
    assert set(node) == {
        "checker",
        "cluster",
        "pass_id",
        "node",
        "verdict",
        "reason",
        "event",
        "level",
        "ts",
    }
    assert {"event", "cluster", "pass_id", "duration_ms", "change", "verdicts"} <= set(summary)
    assert (node["event"], summary["event"], state["level"]) == ("node", "pass", "warning")


def test_level_filter() -> None:
    out = io.StringIO()
    emit(get_logger("json", "info", lean=True, stream=out))
    assert [line["event"] for line in lines(out)] == ["pass", "state"]
