"""What `doctor` says of ProxySQL's monitor and of each node, from records: table-driven."""

from __future__ import annotations

import pytest

from checker_core.core.doctor_nodes import (
    MonitorLogin,
    ProbeSeen,
    login_findings,
    monitor_findings,
    probe_findings,
)
from checker_core.core.model import NodeAddress

N1 = NodeAddress("127.0.0.1", 3311)


@pytest.mark.parametrize(
    ("enabled", "said"), [("true", 0), ("1", 0), ("false", 1), ("FALSE", 1), (None, 0)]
)
def test_monitor_switched_off(enabled: str | None, said: int) -> None:
    variables = {} if enabled is None else {"mysql-monitor_enabled": enabled}
    assert len(monitor_findings(variables)) == said


@pytest.mark.parametrize(
    ("login", "line"),
    [
        (MonitorLogin(N1, None, replication_client=True), None),
        (MonitorLogin(N1, None, replication_client=False), "warning: node 127.0.0.1:3311: "),
        (MonitorLogin(N1, "error 1045: denied"), "problem: node 127.0.0.1:3311: "),
    ],
)
def test_proxysql_monitor_login(login: MonitorLogin, line: str | None) -> None:
    found = [f.line() for f in login_findings("pmon", [login])]
    if line is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(line)


@pytest.mark.parametrize(
    ("checker", "probe", "fix"),
    [
        ("galera", ProbeSeen(N1, None), None),
        ("galera", ProbeSeen(N1, None, galera_status=False), "check wsrep_on"),
        ("gr", ProbeSeen(N1, None, galera_status=False), None),  # GR reads no wsrep status
        ("gr", ProbeSeen(N1, "error 1142: SELECT denied"), "GRANT SELECT ON performance_schema"),
        ("galera", ProbeSeen(N1, "error 2003: refused"), "check the [monitor] account"),
    ],
)
def test_the_checker_probe(checker: str, probe: ProbeSeen, fix: str | None) -> None:
    found = probe_findings(checker, [probe])
    if fix is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].fix.startswith(fix)
