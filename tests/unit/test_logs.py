"""Log lines: stable field names, and the lean JSON writer equal to structlog's output."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from checker_core.edges.logs import get_logger
from checker_core.report import log_pass
from tests.unit.daemon_cases import failed_pass, galera_pass
from tests.unit.galera_cases import N1, probe_down


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


# The contract dashboards and alerts are built on (docs/daemon.md, "Log lines"): renaming or
# dropping one of these is a breaking change, so they are spelled out here, not imported.
NODE_FIELDS = {
    "event", "level", "ts", "checker", "cluster", "pass_id", "node", "verdict", "reason",
    "duration_ms",
}  # fmt: skip
PASS_FIELDS = {
    "event", "level", "ts", "checker", "cluster", "pass_id", "outcome", "role", "duration_ms",
    "writers", "verdicts", "change", "loaded", "reason", "summary",
}  # fmt: skip


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "structlog"])
def test_field_names_of_real_pass_lines_are_stable(lean: bool) -> None:
    out = io.StringIO()
    log = get_logger("json", "debug", lean=lean, stream=out, checker="galera")
    changed = galera_pass([], {N1: probe_down(N1)})
    log_pass(log, changed)
    log_pass(log, failed_pass())
    node, *_, summary, failed = lines(out)
    assert set(node) == NODE_FIELDS
    assert (node["event"], node["node"], node["verdict"]) == ("node", str(N1), "down")
    assert isinstance(node["duration_ms"], float)
    assert set(summary) == PASS_FIELDS
    assert summary["event"] == "pass"
    assert summary["outcome"] == "changed"
    assert summary["change"] and all(isinstance(c, str) for c in summary["change"])
    assert summary["reason"] is None
    assert set(failed) == PASS_FIELDS
    assert (failed["outcome"], failed["level"]) == ("failed", "warning")
    assert failed["reason"] == "cannot reach ProxySQL admin"


def test_level_filter() -> None:
    out = io.StringIO()
    emit(get_logger("json", "info", lean=True, stream=out))
    assert [line["event"] for line in lines(out)] == ["pass", "state"]
