"""Issue 19's sweep: bad inputs a real operator produces, each refused with one clear line that
names its culprit (the key, row, flag or variable), the documented exit code, no Python
traceback, and nothing changed: not ProxySQL's tables, not the state directory.

Every case runs the CLI in this process (click's CliRunner, or oneshot.main for the scheduler's
plain `run`) against an admin endpoint of this module's own (`private_proxysql`: the emulator
on free ports), seeded with a cluster's rows before each case.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from checker_core import oneshot
from checker_core.core.keys import KEYS
from checker_core.core.schema import Checker
from tests.lab.proxysql import ProxySQLLab, admin_cursor

pytestmark = pytest.mark.proxysql

NODES = (13306, 13307, 13308)  # nothing listens there: a pass that ran would be blind
WATCHED = (
    "mysql_servers",
    "runtime_mysql_servers",
    "scheduler",
    "runtime_scheduler",
    "runtime_checksums_values",
    "mysql_galera_hostgroups",
    "runtime_mysql_galera_hostgroups",
)
SEED = (
    *(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port, status, weight) "
        f"VALUES ({hg}, '127.0.0.1', {port}, 'ONLINE', 1000)"
        for hg, port in ((100, NODES[0]), (101, NODES[0]), (101, NODES[1]), (101, NODES[2]))
    ),
    "INSERT INTO scheduler (active, interval_ms, filename, arg1, arg2, comment) VALUES "
    "(1, 2000, '/usr/bin/true', '--config=/elsewhere.toml', 'run', 'someone else')",
    "LOAD MYSQL SERVERS TO RUNTIME",
    "LOAD SCHEDULER TO RUNTIME",
)


# ---------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    id: str
    needle: str  # what the one line must say: the culprit's name
    code: int = 2
    args: tuple[str, ...] = ("check-config",)
    # (section, key, TOML literal or None to remove); section "cluster" is cluster[0]
    sets: tuple[tuple[str, str, str | None], ...] = ()
    text: tuple[str, str] | None = None  # (old, new) on the rendered file
    raw: bytes | None = None  # the file's bytes, as they are
    config: str | None = "{config}"  # what --config names; None: no --config
    env: Mapping[str, str] = field(default_factory=dict)
    sql: tuple[str, ...] = ()  # admin statements before the case (part of "before")
    checker: Checker = Checker.GALERA
    lean: bool = False  # the scheduler's plain `run` (oneshot.main), not click
    problems: int | None = 1  # the count in "N problem(s):", when the line says it
    clusters: str | None = None  # instead of the [[cluster]] table: put first in the file
    one_line: bool = True  # click's own usage errors print Usage and a hint around it


def key(section: str, name: str, literal: str | None, needle: str, **kw: Any) -> Case:
    where = "cluster[0]" if section == "cluster" else section
    return Case(f"{where}.{name}={literal}", needle, sets=((section, name, literal),), **kw)


def _type_and_range_cases() -> list[Case]:
    """From the schema: a quoted number, a number below and above the bounds, a string where a
    boolean goes, a choice that is not one, a number where text goes."""
    cases = []
    for k in KEYS:
        if Checker.GALERA not in k.checkers or k.secret:
            continue
        where = "cluster[0]" if k.section == "cluster" else k.section
        name = f"{where}.{k.name}"
        if k.kind is int:
            cases.append(key(k.section, k.name, '"12"', f"{name}: expected a whole number"))
            if k.minimum is not None:
                low = k.minimum - 1
                cases.append(key(k.section, k.name, str(low), f"{name}: must be >= {k.minimum}"))
            if k.maximum is not None:
                high = k.maximum + 1
                cases.append(key(k.section, k.name, str(high), f"{name}: must be <= {k.maximum}"))
        elif k.kind is bool:
            cases.append(key(k.section, k.name, '"yes"', f"{name}: expected true or false"))
            cases.append(key(k.section, k.name, "1", f"{name}: expected true or false"))
        elif k.choices:
            cases.append(key(k.section, k.name, '"bogus"', f"{name}: must be one of"))
        else:
            cases.append(key(k.section, k.name, "42", f"{name}: expected a string"))
    return cases


UNKNOWN_KEYS = [
    key("proxysql", "prot", "6032", "proxysql.prot: unknown key (did you mean port?)"),
    key("proxysql", "passwd", '"x"', "proxysql.passwd: unknown key"),
    key("monitor", "usr", '"m"', "monitor.usr: unknown key (did you mean user?)"),
    key("run", "interval", "2000", "run.interval: unknown key (did you mean interval_ms?)"),
    key("run", "state_directory", '"/x"', "run.state_directory: unknown key"),
    key("cluster", "writer_hg", "1", "cluster[0].writer_hg: unknown key"),
    key("cluster", "retry_upp", "1", "cluster[0].retry_upp: unknown key (did you mean retry_up?)"),
    key("cluster", "brownout", '"hold"', "cluster[0].brownout: only gr-checker uses this key"),
    Case(
        "gr-main_segment",
        "cluster[0].main_segment: only galera-checker uses this key",
        sets=(("cluster", "main_segment", "1"),),
        checker=Checker.GR,
    ),
    Case(
        "section-proxy",
        "proxy: unknown section (did you mean proxysql?)",
        text=("[run]", "[proxy]\nport = 1\n[run]"),
    ),
    Case(
        "section-clusters",
        "clusters: unknown section (did you mean cluster?)",
        text=("[[cluster]]", "[[clusters]]\nname = 'x'\n[[cluster]]"),
    ),
    Case(
        "top-level-key", "debug: unknown section", text=("[proxysql]", "debug = true\n[proxysql]")
    ),
]

SYNTAX = [
    Case("unclosed-string", "is not valid TOML", text=('user = "monitor"', 'user = "monitor')),
    Case("unclosed-table", "is not valid TOML", text=("[run]", "[run")),
    Case("duplicate-key", "is not valid TOML", text=('user = "monitor"', 'user = "a"\nuser = "b"')),
    Case(
        "trailing-comma",
        "is not valid TOML",
        text=("log_format", "log_level = 'info',\nlog_format"),
    ),
    Case("no-equals", "is not valid TOML", text=('user = "monitor"', 'user "monitor"')),
    Case("ini-colon", "is not valid TOML", text=('user = "monitor"', "user: monitor")),
    Case("json-file", "is not valid TOML", raw=b'{"proxysql": {"port": 6032}}\n'),
    Case("yaml-file", "is not valid TOML", raw=b"proxysql:\n  port: 6032\n"),
    Case(
        "cluster-is-a-string",
        "cluster: expected [[cluster]] tables",
        clusters='cluster = "main"\n',
        problems=None,
    ),
    Case("bare-word-value", "is not valid TOML", text=('log_format = "json"', "log_format = json")),
]

ENCODINGS = [
    Case("utf16-le", "is UTF-16 text; save it as UTF-8", raw=b"\xff\xfe[\x00r\x00u\x00n\x00]\x00"),
    Case("utf16-be", "is UTF-16 text; save it as UTF-8", raw=b"\xfe\xff\x00[\x00r\x00u\x00n\x00]"),
    Case("latin1", "is not UTF-8 text (bad byte at offset", raw=b'[run]\nlog_level = "d\xe9bug"\n'),
    Case("nul-bytes", "holds NUL bytes", raw=b"[run]\n\x00\x00\x00"),
    Case("binary", "is not UTF-8 text", raw=bytes(range(128, 256)) * 4),
    Case("empty-file", "cluster: no [[cluster]] table", raw=b"", problems=None, one_line=False),
    Case(
        "only-a-bom",
        "cluster: no [[cluster]] table",
        raw=b"\xef\xbb\xbf",
        problems=None,
        one_line=False,
    ),
    Case("pem-as-config", "is not valid TOML", raw=b"-----BEGIN CERTIFICATE-----\nMIIB\n"),
]

FILES = [
    Case("config-missing", "cannot read {tmp}/nope.toml: No such file", config="{tmp}/nope.toml"),
    Case("config-is-dir", "'{tmp}/adir' is a directory", config="{tmp}/adir", one_line=False),
    Case(
        "config-is-dir-lean",
        "{tmp}/adir is a directory, not a TOML file",
        config="{tmp}/adir",
        lean=True,
    ),
    Case("config-is-fifo", "{tmp}/fifo is not a regular file", config="{tmp}/fifo"),
    Case("config-empty", "--config: empty path", config=""),
    Case("config-empty-run", "--config: empty path", config="", args=("run",)),
    key("proxysql", "password_file", '"{tmp}/nope.pw"', "proxysql.password_file: cannot read"),
    key(
        "proxysql",
        "password_file",
        '"{tmp}/adir"',
        "proxysql.password_file: {tmp}/adir is a directory",
    ),
    key(
        "proxysql",
        "password_file",
        '"{tmp}/empty.pw"',
        "proxysql.password_file: {tmp}/empty.pw is empty",
    ),
    key(
        "proxysql",
        "password_file",
        '"{tmp}/binary.pw"',
        "proxysql.password_file: {tmp}/binary.pw is not UTF-8 text",
    ),
    key(
        "proxysql",
        "password_file",
        '"{tmp}/fifo"',
        "proxysql.password_file: {tmp}/fifo is not a regular file",
    ),
    Case(
        "password-and-file",
        "monitor.password: set password or password_file, not both",
        sets=(("monitor", "password_file", '"{tmp}/admin.pw"'),),
    ),
    Case(
        "ca-missing",
        "proxysql.ssl_ca: no such file: {tmp}/nope.pem",
        sets=(("proxysql", "ssl_mode", '"verify_ca"'), ("proxysql", "ssl_ca", '"{tmp}/nope.pem"')),
    ),
    Case(
        "ca-garbage",
        "proxysql.ssl_ca: {tmp}/garbage.pem: not a PEM CA certificate",
        sets=(
            ("proxysql", "ssl_mode", '"verify_ca"'),
            ("proxysql", "ssl_ca", '"{tmp}/garbage.pem"'),
        ),
    ),
    Case(
        "ca-garbage-run",
        "monitor.ssl_ca: {tmp}/garbage.pem: not a PEM CA certificate",
        args=("run",),
        sets=(("monitor", "ssl_mode", '"verify_ca"'), ("monitor", "ssl_ca", '"{tmp}/garbage.pem"')),
    ),
    Case(
        "ca-garbage-lean",
        "monitor.ssl_ca: {tmp}/garbage.pem: not a PEM CA certificate",
        lean=True,
        sets=(("monitor", "ssl_mode", '"verify_ca"'), ("monitor", "ssl_ca", '"{tmp}/garbage.pem"')),
    ),
    Case(
        "ca-is-a-key",
        "monitor.ssl_ca: {certs}/server-key.pem: not a PEM CA certificate",
        sets=(
            ("monitor", "ssl_mode", '"verify_ca"'),
            ("monitor", "ssl_ca", '"{certs}/server-key.pem"'),
        ),
    ),
    Case(
        "cert-garbage",
        "monitor.ssl_cert: {tmp}/garbage.pem: not a PEM certificate",
        sets=(
            ("monitor", "ssl_cert", '"{tmp}/garbage.pem"'),
            ("monitor", "ssl_key", '"{certs}/server-key.pem"'),
        ),
    ),
    Case(
        "key-garbage",
        "monitor.ssl_key: {tmp}/garbage.pem: not a PEM private key",
        sets=(
            ("monitor", "ssl_cert", '"{certs}/server-cert.pem"'),
            ("monitor", "ssl_key", '"{tmp}/garbage.pem"'),
        ),
    ),
    Case(
        "key-of-another-cert",
        "proxysql.ssl_key: {certs}/ca-key.pem: does not belong",
        sets=(
            ("proxysql", "ssl_cert", '"{certs}/server-cert.pem"'),
            ("proxysql", "ssl_key", '"{certs}/ca-key.pem"'),
        ),
    ),
    Case(
        "cert-without-key",
        "monitor.ssl_cert: ssl_cert and ssl_key go together",
        sets=(("monitor", "ssl_cert", '"{certs}/server-cert.pem"'),),
    ),
    Case(
        "verify-without-ca",
        'monitor.ssl_mode: "verify_identity" needs monitor.ssl_ca',
        sets=(("monitor", "ssl_mode", '"verify_identity"'),),
    ),
    key("run", "state_dir", '"state"', "run.state_dir: 'state' must be an absolute path"),
    key(
        "run",
        "state_dir",
        '"{tmp}/a-file/state"',
        "run.state_dir: {tmp}/a-file/state cannot be created: {tmp}/a-file is a file",
    ),
    key(
        "run",
        "state_dir",
        '"{tmp}/a-file"',
        "run.state_dir: {tmp}/a-file exists and is not a directory",
    ),
    Case(
        "state-under-file-pause",
        "run.state_dir: {tmp}/a-file/state cannot be created",
        args=("pause",),
        sets=(("run", "state_dir", '"{tmp}/a-file/state"'),),
    ),
    Case(
        "state-under-file-lean",
        "run.state_dir: {tmp}/a-file/state cannot be created",
        lean=True,
        sets=(("run", "state_dir", '"{tmp}/a-file/state"'),),
    ),
]

CLI = [
    Case("unknown-command", "No such command 'chek-config'", args=("chek-config",), one_line=False),
    Case("unknown-option", "No such option '--verbose'", args=("run", "--verbose"), one_line=False),
    Case(
        "set-without-equals",
        "--set: 'retry_up': expected KEY=VALUE",
        args=("--set", "retry_up", "check-config"),
    ),
    Case(
        "set-unknown-section",
        "--set proxy.port: unknown section 'proxy'",
        args=("--set", "proxy.port=1", "check-config"),
    ),
    Case(
        "set-unknown-key",
        "--set proxysql.prot: unknown key proxysql.prot (did you mean port?)",
        args=("--set", "proxysql.prot=1", "check-config"),
    ),
    Case(
        "set-cluster-without-index",
        "only cluster keys take an index, and they need one",
        args=("--set", "cluster.retry_up=1", "check-config"),
    ),
    Case(
        "set-cluster-out-of-range",
        "--set cluster[3].retry_up: there is no cluster[3] in the file",
        args=("--set", "cluster[3].retry_up=1", "check-config"),
    ),
    Case(
        "set-index-on-section",
        "only cluster keys take an index",
        args=("--set", "run[0].log_level=debug", "check-config"),
    ),
    Case(
        "set-monitor-password",
        "--set monitor.password: a password on the command line",
        args=("--set", "monitor.password=hunter2", "check-config"),
    ),
    Case(
        "set-proxysql-password",
        "--set proxysql.password: a password on the command line",
        args=("run", "--set", "proxysql.password=hunter2"),
    ),
    Case(
        "set-password-lean",
        "--set monitor.password: a password on the command line",
        lean=True,
        env={"LEAN_SET": "monitor.password=hunter2"},
    ),
    Case(
        "set-bad-value",
        "--set run.log_level (run.log_level): must be one of",
        args=("--set", "run.log_level=loud", "check-config"),
    ),
    Case(
        "set-bad-int",
        "--set cluster[0].retry_down (cluster[0].retry_down): expected a whole",
        args=("run", "--set", "cluster[0].retry_down=two"),
    ),
    Case(
        "no-config", "no configuration file: pass --config FILE or set CHECKER_CONFIG", config=None
    ),
    Case("no-config-lean", "no configuration file", config=None, lean=True),
    Case(
        "config-without-value",
        "Option '--config' requires an argument",
        config=None,
        args=("check-config", "--config"),
        one_line=False,
    ),
    Case(
        "pause-unknown",
        "--cluster nope: no such cluster (known: main)",
        args=("pause", "--cluster", "nope"),
    ),
    Case(
        "pause-one-unknown",
        "--cluster nope: no such cluster",
        args=("pause", "--cluster", "main", "--cluster", "nope"),
    ),
    Case("resume-unknown", "--cluster nope: no such cluster", args=("resume", "--cluster", "nope")),
    Case("pause-reason-newline", "--reason: one line", args=("pause", "--reason", "a\nb")),
    Case(
        "status-format",
        "Invalid value for '--format'",
        args=("status", "--format", "xml"),
        one_line=False,
    ),
    Case("adopt-bogus-flag", "No such option '--bogus'", args=("adopt", "--bogus"), one_line=False),
    Case(
        "dry-run-extra-arg",
        "Got unexpected extra argument",
        args=("run", "--dry-run", "now"),
        one_line=False,
    ),
    *(
        Case(
            f"healthcheck-timeout-{t}",
            "--timeout: ",
            config=None,
            args=("healthcheck", "--listen", "127.0.0.1:1", "--timeout", t),
        )
        for t in ("-1", "nan", "0", "-inf", "1e308")
    ),
    Case(
        "healthcheck-timeout-word",
        "Invalid value for '--timeout'",
        config=None,
        args=("healthcheck", "--timeout", "soon"),
        one_line=False,
    ),
    Case(
        "healthcheck-listen-space",
        "--listen: '127.0.0.1 :9140' holds a space",
        config=None,
        args=("healthcheck", "--listen", "127.0.0.1 :9140"),
    ),
    Case(
        "healthcheck-listen-no-port",
        "--listen: 'localhost' is not HOST:PORT",
        config=None,
        args=("healthcheck", "--listen", "localhost"),
    ),
    Case(
        "healthcheck-listen-port-range",
        "--listen: '127.0.0.1:99999': port 99999",
        config=None,
        args=("healthcheck", "--listen", "127.0.0.1:99999"),
    ),
    Case(
        "healthcheck-at-mysql",
        "does not answer HTTP",
        code=1,
        config=None,
        args=("healthcheck", "--listen", "127.0.0.1:{admin_port}"),
    ),
    Case(
        "healthcheck-at-banner",
        "does not answer HTTP",
        code=1,
        config=None,
        args=("healthcheck", "--listen", "127.0.0.1:{banner_port}"),
    ),
]

ENVIRONMENT = [
    Case(f"env-{var}={value!r}", needle, env={var: value}, problems=problems)
    for var, value, needle, problems in (
        ("CHECKER_PROXYSQL_PORT", "abc", "CHECKER_PROXYSQL_PORT (proxysql.port): expected a", 1),
        ("CHECKER_RUN_LOG_LEVEL", "loud", "CHECKER_RUN_LOG_LEVEL (run.log_level): must be one", 1),
        ("CHECKER_RUN_PERSIST", "maybe", "CHECKER_RUN_PERSIST (run.persist): expected true or", 1),
        (
            "CHECKER_CLUSTER_0_WRITER_HOSTGROUP",
            "-5",
            "(cluster[0].writer_hostgroup): must be >=",
            1,
        ),
        (
            "CHECKER_CLUSTER_3_RETRY_UP",
            "1",
            "CHECKER_CLUSTER_3_RETRY_UP: there is no cluster[3]",
            1,
        ),
        ("CHECKER_BOGUS", "1", "CHECKER_BOGUS: unknown environment variable", 1),
        (
            "CHECKER_PROXYSQL_PASSWROD",
            "x",
            "CHECKER_PROXYSQL_PASSWROD: unknown key proxysql.passwrod (did you mean password?)",
            1,
        ),
        ("CHECKER_MONITOR_USR", "x", "CHECKER_MONITOR_USR: unknown key monitor.usr", 1),
        (
            "CHECKER_MONITOR_PASSWORD",
            "a\nb",
            "CHECKER_MONITOR_PASSWORD (monitor.password): holds a line break",
            1,
        ),
        (
            "CHECKER_RUN_STATE_DIR",
            "relative/dir",
            "CHECKER_RUN_STATE_DIR (run.state_dir): 'relative/dir' must be",
            None,
        ),
        (
            "CHECKER_RUN_METRICS_LISTEN",
            "127.0.0.1 :9",
            "CHECKER_RUN_METRICS_LISTEN (run.metrics_listen): '127.0.0.1 :9' holds",
            1,
        ),
        (
            "CHECKER_CLUSTER_0_NAME",
            "bad name",
            "CHECKER_CLUSTER_0_NAME (cluster[0].name): 'bad name': use 1-64",
            1,
        ),
        ("CHECKER_PROXYSQL_USER", "", "CHECKER_PROXYSQL_USER (proxysql.user): is empty", 1),
        (
            "CHECKER_PROXYSQL_USER",
            "admin\n",
            "CHECKER_PROXYSQL_USER (proxysql.user): 'admin\\n' holds a control character",
            1,
        ),
        (
            "CHECKER_RUN_INTERVAL_MS",
            " ",
            "CHECKER_RUN_INTERVAL_MS (run.interval_ms): expected a",
            1,
        ),
        ("CHECKER_CLUSTER_0_FAIL_BACK", "2", "(cluster[0].fail_back): expected true or false", 1),
        (
            "CHECKER_PROXYSQL_HOST",
            "db host",
            "CHECKER_PROXYSQL_HOST (proxysql.host): 'db host' is not a host",
            1,
        ),
    )
] + [
    Case(
        "env-config-missing",
        "cannot read {tmp}/gone.toml",
        config=None,
        env={"CHECKER_CONFIG": "{tmp}/gone.toml"},
    ),
    Case(
        "env-bad-lean",
        "CHECKER_RUN_LOG_LEVEL (run.log_level): must be one of",
        lean=True,
        env={"CHECKER_RUN_LOG_LEVEL": "loud"},
    ),
]

SEMANTICS = [
    key(
        "cluster",
        "reader_hostgroup",
        "100",
        "cluster[0].reader_hostgroup: 100 is the same as writer_hostgroup",
    ),
    key("cluster", "name", '"main db"', "cluster[0].name: 'main db': use 1-64 of"),
    key("cluster", "name", '"' + "n" * 65 + '"', "cluster[0].name: '" + "n" * 65 + "': use 1-64"),
    key(
        "cluster",
        "writer_hostgroup",
        "2147483000",
        "cluster[0].config_writer_hostgroup: its default 8000 + writer_hostgroup",
    ),
    key("cluster", "writer_hostgroup", "4294967296", "cluster[0].writer_hostgroup: must be <= "),
    key("proxysql", "user", '""', "proxysql.user: is empty"),
    key("proxysql", "user", '"admin\\n"', "proxysql.user: 'admin\\n' holds a control character"),
    key("proxysql", "host", '"not a host!"', "proxysql.host: 'not a host!' is not a host name"),
    key(
        "proxysql",
        "cluster_address",
        '"nowhere"',
        "proxysql.cluster_address: 'nowhere': expected host:port",
    ),
    key(
        "run",
        "metrics_listen",
        '"127.0.0.1: 9140"',
        "run.metrics_listen: '127.0.0.1: 9140' holds a space",
    ),
    key("run", "metrics_listen", '"[::1:9140"', "run.metrics_listen:"),
    key("run", "max_runtime_ms", "2000", "run.max_runtime_ms: 2000 must be below run.interval_ms"),
    key(
        "monitor",
        "connect_timeout_ms",
        "1800",
        "monitor.connect_timeout_ms: 1800 must be below run.max_runtime_ms",
    ),
    key(
        "monitor",
        "password",
        "31415926535",
        "monitor.password: expected a string, got a value that is not shown",
    ),
    key("monitor", "password", None, "monitor.password: missing (set password or password_file)"),
    Case("cluster-empty-list", "cluster: an empty list", clusters="cluster = []\n"),
    Case(
        "cluster-empty-table",
        "cluster[0].name: missing (required)",
        problems=5,
        clusters="[[cluster]]\n",
    ),
    Case(
        "two-clusters-same-name",
        "cluster[1].name: 'main' is already cluster[0].name",
        text=(
            "[[cluster]]",
            "[[cluster]]\nname = 'main'\nwriter_hostgroup = 200\n"
            "reader_hostgroup = 201\nbackup_writer_hostgroup = 202\noffline_hostgroup = 9200\n"
            "[[cluster]]",
        ),
    ),
    Case(
        "two-clusters-same-hostgroup",
        "cluster[1].reader_hostgroup: 101 is already cluster[0].reader_hostgroup",
        text=(
            "[[cluster]]",
            "[[cluster]]\nname = 'b'\nwriter_hostgroup = 200\n"
            "reader_hostgroup = 101\nbackup_writer_hostgroup = 202\noffline_hostgroup = 9200\n"
            "[[cluster]]",
        ),
    ),
]

_GALERA_ROW = (
    "INSERT INTO {layer}mysql_galera_hostgroups (writer_hostgroup, backup_writer_hostgroup, "
    "reader_hostgroup, offline_hostgroup, active) VALUES ({w}, {b}, {r}, {o}, 1)"
)
_NATIVE = {
    "galera": _GALERA_ROW.format(layer="", w=100, b=102, r=101, o=9100),
    "galera-other-writer": _GALERA_ROW.format(layer="", w=500, b=501, r=101, o=503),
    "gr": _GALERA_ROW.replace("galera", "group_replication").format(
        layer="", w=100, b=102, r=101, o=9100
    ),
    "replication": "INSERT INTO mysql_replication_hostgroups (writer_hostgroup, "
    "reader_hostgroup) VALUES (700, 101)",
    "template": _GALERA_ROW.format(layer="", w=8100, b=8102, r=8103, o=8104),
}
LOAD = "LOAD MYSQL SERVERS TO RUNTIME"


def _row(host: str, port: int = 3306, hostgroup: int = 101) -> tuple[str, ...]:
    quoted = host.replace("'", "''")
    return (
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port, status, weight) "
        f"VALUES ({hostgroup}, '{quoted}', {port}, 'ONLINE', 1000)",
        LOAD,
    )


ROWS = [
    Case("row-space", "hostname 'db 1' is not a host name", args=("run",), sql=_row("db 1")),
    Case("row-shell", "is not a host name", args=("run",), sql=_row("$(reboot)")),
    Case(
        "row-sql", "is not a host name", args=("run",), sql=_row("x'; DROP TABLE mysql_servers; --")
    ),
    Case(
        "row-socket-port",
        "is a unix socket path, which needs port 0, not 3306",
        args=("run",),
        sql=_row("/var/run/mysqld/mysqld.sock", 3306),
    ),
    Case("row-long-name", "is not a host name", args=("run",), sql=_row("a" * 300)),
    Case("row-newline", "is not a host name", args=("run",), sql=_row("db\n1")),
    Case("row-empty-host", "empty hostname", args=("run",), sql=_row("")),
    Case("row-in-template", "is not a host name", args=("run",), sql=_row("db 1", hostgroup=8101)),
    Case("row-status", "is not a host name", args=("status",), sql=_row("db 1")),
    Case("row-dry-run", "is not a host name", args=("run", "--dry-run"), sql=_row("db 1")),
    Case("row-lean", "is not a host name", lean=True, sql=_row("db 1")),
    Case("row-adopt", "is not a host name", args=("adopt",), sql=_row("db 1")),
    *(
        Case(
            f"row-port-0-{' '.join(args) or 'lean'}",
            "row (101, db2, 0): port 0 beside the network host 'db2'",
            args=args,
            lean=not args,
            sql=_row("db2", 0),
            problems=None,
        )
        for args in (("run",), ("check-config",), ("status",), ())
    ),
    *(
        Case(
            f"native-{name}-{' '.join(args)}",
            needle,
            args=args,
            sql=(_NATIVE[name], LOAD),
            problems=None,
        )
        for name, args, needle in (
            (
                "galera",
                ("check-config",),
                "mysql_galera_hostgroups (staged) manages hostgroup 100 as its writer_hostgroup",
            ),
            (
                "galera",
                ("run",),
                "mysql_galera_hostgroups (staged) manages hostgroup 100 as its writer",
            ),
            ("galera", ("status",), "mysql_galera_hostgroups (staged) manages hostgroup 100"),
            ("galera", ("run", "--dry-run"), "manages hostgroup 100"),
            ("galera", ("adopt",), "mysql_galera_hostgroups (staged) manages hostgroup 100"),
            (
                "galera-other-writer",
                ("check-config",),
                "manages hostgroup 101 as its "
                "reader_hostgroup, which this checker manages as reader_hostgroup",
            ),
            (
                "gr",
                ("check-config",),
                "mysql_group_replication_hostgroups (staged) manages hostgroup 100",
            ),
            ("gr", ("run",), "mysql_group_replication_hostgroups (staged) manages hostgroup 100"),
            (
                "replication",
                ("check-config",),
                "mysql_replication_hostgroups (staged) manages "
                "hostgroup 101 as its reader_hostgroup",
            ),
            (
                "template",
                ("check-config",),
                "manages hostgroup 8100 as its writer_hostgroup, "
                "which this checker manages as config_writer_hostgroup",
            ),
        )
    ),
    Case(
        "native-live-only",
        "runtime_mysql_galera_hostgroups (live) manages hostgroup 100",
        sql=(_NATIVE["galera"], LOAD, "DELETE FROM mysql_galera_hostgroups"),
        problems=None,
    ),
    Case(
        "native-staged-only",
        "mysql_galera_hostgroups (staged) manages hostgroup 100",
        sql=(_NATIVE["galera"],),
        problems=None,
    ),
    Case("native-lean", "manages hostgroup 100", lean=True, sql=(_NATIVE["galera"], LOAD)),
    Case(
        "native-gr-checker",
        "manages hostgroup 100",
        checker=Checker.GR,
        args=("run",),
        sql=(_NATIVE["gr"], LOAD),
    ),
]

SCHEDULER = [
    Case(
        "scheduler-gr-checker-beside",
        "scheduler row id 77 (/usr/local/bin/gr-checker) is active and runs gr-checker on the "
        "same configuration file {config}",
        args=("install-scheduler", "--apply"),
        sql=(
            "INSERT INTO scheduler (id, active, interval_ms, filename, arg1, arg2) "
            "VALUES (77, 1, 2000, '/usr/local/bin/gr-checker', '-c {config}', 'run')",
            "LOAD SCHEDULER TO RUNTIME",
        ),
    ),
]

ADMIN = [
    *(
        Case(
            f"wrong-password-{' '.join(args)}",
            "access denied for user 'admin'",
            args=args,
            sets=(("proxysql", "password_file", '"{tmp}/wrong.pw"'),),
            problems=None,
        )
        for args in (
            ("check-config",),
            ("run",),
            ("adopt",),
            ("install-scheduler", "--apply"),
            ("status",),
        )
    ),
    Case(
        "wrong-password-lean",
        "access denied for user 'admin'",
        lean=True,
        sets=(("proxysql", "password_file", '"{tmp}/wrong.pw"'),),
    ),
    Case(
        "wrong-user",
        "access denied for user 'nobody'",
        args=("run",),
        sets=(("proxysql", "user", '"nobody"'),),
    ),
    *(
        Case(
            f"closed-port-{' '.join(args)}",
            "unreachable",
            code=1,
            args=args,
            sets=(("proxysql", "port", "{closed_port}"),),
        )
        for args in (("run",), ("adopt",), ("install-scheduler", "--apply"), ("status",))
    ),
    Case(
        "closed-port-lean",
        "unreachable",
        code=1,
        lean=True,
        sets=(("proxysql", "port", "{closed_port}"),),
    ),
    *(
        Case(
            f"not-mysql-{' '.join(args)}",
            "the service on proxysql.port does not speak the MySQL protocol",
            args=args,
            sets=(("proxysql", "port", "{banner_port}"),),
            problems=None,
        )
        for args in (("check-config",), ("run",), ("adopt",), ("install-scheduler", "--apply"))
    ),
    Case(
        "not-mysql-lean",
        "the service on proxysql.port does not speak the MySQL protocol",
        lean=True,
        sets=(("proxysql", "port", "{banner_port}"),),
    ),
    *(
        Case(
            f"silent-admin-{' '.join(args)}",
            "connected, but no MySQL greeting within proxysql.connect_timeout_ms (200 ms)",
            code=1,
            args=args,
            sets=(("proxysql", "port", "{silent_port}"), ("proxysql", "connect_timeout_ms", "200")),
        )
        for args in (("run",), ("adopt",))
    ),
    Case(
        "silent-admin-past-the-deadline",
        "no answer before the pass's deadline (run.max_runtime_ms)",
        code=1,
        args=("run",),
        sets=(
            ("proxysql", "port", "{silent_port}"),
            ("proxysql", "connect_timeout_ms", "10000"),
            ("run", "max_runtime_ms", "600"),
        ),
    ),
]

CASES = (
    _type_and_range_cases()
    + UNKNOWN_KEYS
    + SYNTAX
    + ENCODINGS
    + FILES
    + CLI
    + ENVIRONMENT
    + SEMANTICS
    + ROWS
    + SCHEDULER
    + ADMIN
)


def test_the_sweep_is_large_and_its_ids_unique() -> None:
    assert len(CASES) >= 150
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


# ---------------------------------------------------------------- the world of a case


class Listener:
    """A TCP service on 127.0.0.1 of the test's own: `banner` speaks first and not MySQL nor
    HTTP; `silent` accepts (the kernel's backlog) and never says a word."""

    def __init__(self, banner: bytes | None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.thread: threading.Thread | None = None
        if banner is not None:
            self.thread = threading.Thread(target=self._serve, args=(banner,), daemon=True)
            self.thread.start()

    def _serve(self, banner: bytes) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(banner)

    def close(self) -> None:
        self.sock.close()
        if self.thread is not None:
            self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def listeners() -> Iterator[dict[str, int]]:
    from tests.lab.process import free_port

    banner, silent = Listener(b"SSH-2.0-OpenSSH_9.2\r\n"), Listener(None)
    try:
        yield {"banner_port": banner.port, "silent_port": silent.port, "closed_port": free_port()}
    finally:
        banner.close()
        silent.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.lab.certs import make_cert_set

    where = tmp_path_factory.mktemp("certs")
    make_cert_set(where)
    return where


@dataclass(frozen=True)
class World:
    tmp: Path
    lab: ProxySQLLab
    names: dict[str, str]

    def fill(self, text: str) -> str:
        for name, value in self.names.items():
            text = text.replace("{" + name + "}", value)
        return text


@pytest.fixture
def world(
    private_proxysql: ProxySQLLab,
    tmp_path: Path,
    listeners: dict[str, int],
    certs: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> World:
    for var in list(os.environ):
        if var.startswith("CHECKER_"):
            monkeypatch.delenv(var)
    private_proxysql.reset()
    with admin_cursor(private_proxysql) as cur:
        cur.execute("DELETE FROM mysql_replication_hostgroups")
        for statement in SEED:
            cur.execute(statement)
    (tmp_path / "admin.pw").write_text(private_proxysql.admin_password + "\n")
    (tmp_path / "wrong.pw").write_text("not-the-password\n")
    (tmp_path / "empty.pw").write_text("")
    (tmp_path / "binary.pw").write_bytes(b"\xff\xfe\x00\x81")
    (tmp_path / "garbage.pem").write_bytes(b"\x00garbage\xff" * 8)
    (tmp_path / "a-file").write_text("")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    state = tmp_path / "state"
    state.mkdir()
    (state / "galera.main.state.json").write_text("{}\n")
    names = {
        "tmp": str(tmp_path),
        "certs": str(certs),
        "config": str(tmp_path / "checker.toml"),
        "admin_port": str(private_proxysql.admin_port),
        **{k: str(v) for k, v in listeners.items()},
    }
    return World(tmp_path, private_proxysql, names)


def base_config(world: World) -> dict[str, Any]:
    return {
        "proxysql": {
            "host": '"127.0.0.1"',
            "port": world.names["admin_port"],
            "user": f'"{world.lab.admin_user}"',
            "password_file": '"{tmp}/admin.pw"',
            "connect_timeout_ms": "500",
            "read_timeout_ms": "1000",
        },
        "monitor": {"user": '"monitor"', "password": '"monitor-pw"'},
        "node_admin": {"user": '"nodeadmin"', "password": '"nodeadmin-pw"'},
        "run": {"state_dir": '"{tmp}/state"', "log_format": '"json"'},
        "cluster": {
            "name": '"main"',
            "writer_hostgroup": "100",
            "reader_hostgroup": "101",
            "backup_writer_hostgroup": "102",
            "offline_hostgroup": "9100",
        },
    }


def render(
    config: dict[str, Any],
    sets: tuple[tuple[str, str, str | None], ...],
    clusters: str | None = None,
) -> str:
    for section, name, literal in sets:
        if literal is None:
            config[section].pop(name, None)
        else:
            config[section][name] = literal
    lines = []
    for section in ("proxysql", "monitor", "node_admin", "run"):
        lines.append(f"[{section}]")
        lines += [f"{k} = {v}" for k, v in config[section].items()]
    if clusters is not None:
        return clusters + "\n".join(lines) + "\n"
    lines.append("[[cluster]]")
    lines += [f"{k} = {v}" for k, v in config["cluster"].items()]
    return "\n".join(lines) + "\n"


def monitor_blind(row: tuple[Any, ...], status: int) -> tuple[Any, ...]:
    """A runtime row as the checker could have left it: a real ProxySQL's monitor SHUNs a server
    it cannot reach (these nodes are closed ports) and lifts the shun again, at any moment, in
    runtime only. The checker never writes SHUNNED, so ONLINE and SHUNNED are one state here."""
    if row[status] in ("ONLINE", "SHUNNED"):
        return (*row[:status], "ONLINE or SHUNNED", *row[status + 1 :])
    return row


def snapshot(world: World) -> dict[str, object]:
    """ProxySQL's watched tables and the state directory (lock files aside: they hold only the
    pid of the last process that took them, no state)."""
    seen: dict[str, object] = {}
    with admin_cursor(world.lab) as cur:
        for table in WATCHED:
            cur.execute(f"SELECT * FROM {table}")
            rows = cur.fetchall()
            if table == "runtime_mysql_servers":
                status = [d[0] for d in cur.description or ()].index("status")
                rows = tuple(monitor_blind(row, status) for row in rows)
            seen[table] = sorted(map(repr, rows))
    state = world.tmp / "state"
    seen["state"] = sorted(
        (str(p.relative_to(world.tmp)), p.read_bytes() if p.is_file() else b"")
        for p in [state, *state.rglob("*")]
        if p.exists() and not p.name.endswith(".lock")
    )
    return seen


def run_case(case: Case, world: World, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The case's command line, in this process; its exit code and everything it printed."""
    from galera_checker.cli import build as build_galera
    from galera_checker.cli import kind as galera_kind
    from gr_checker.cli import build as build_gr
    from gr_checker.cli import kind as gr_kind

    env = {k: world.fill(v) for k, v in case.env.items() if k != "LEAN_SET"}
    args = [world.fill(a) for a in case.args]
    config = None if case.config is None else world.fill(case.config)
    if case.lean:
        argv = ([f"--config={config}"] if config else []) + ["run"]
        if "LEAN_SET" in case.env:
            argv += ["--set", case.env["LEAN_SET"]]
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            kind = galera_kind if case.checker is Checker.GALERA else gr_kind
            capsys.readouterr()
            code = oneshot.main(argv, case.checker, kind)
            out = capsys.readouterr()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        assert code is not None
        return code, out.out + out.err
    build = build_galera if case.checker is Checker.GALERA else build_gr
    argv = (["--config", config] if config is not None else []) + args
    result = CliRunner().invoke(build(), argv, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        trace = "".join(traceback.format_exception(result.exception))
        pytest.fail(f"an exception reached the user:\n{result.output}\n{trace}")
    return result.exit_code, result.output


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    path = world.tmp / "checker.toml"
    if case.raw is not None:
        path.write_bytes(case.raw)
    else:
        text = render(base_config(world), case.sets, case.clusters)
        if case.text is not None:
            old, new = case.text
            assert old in text, old
            text = text.replace(old, new, 1)
        path.write_text(world.fill(text))
    path.chmod(0o600)
    with admin_cursor(world.lab) as cur:
        for statement in case.sql:
            cur.execute(world.fill(statement))
    before = snapshot(world)
    code, output = run_case(case, world, capsys)
    after = snapshot(world)

    needle = world.fill(case.needle)
    assert "Traceback" not in output, output
    assert code == case.code, output
    assert needle in output, output
    if "hunter2" in " ".join(case.args) + " ".join(case.env.values()):
        assert "hunter2" not in output
    assert "31415926535" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("warning:")]
    if case.problems is not None and "problem(s):" in output:
        assert f": {case.problems} problem(s):" in lines[0], output
        assert len(lines) == 1 + case.problems, output
    elif case.one_line:
        assert len(lines) == 1 or (len(lines) == 2 and "problem(s):" in lines[0]), output
    assert after == before, case.id


# ---------------------------------------------------------------- install-scheduler --apply


@pytest.mark.parametrize(
    ("filename", "arg1", "arg2", "arg3"),
    [
        ("{script}", "--config={config}", "run", None),
        ("{script}", "--config", "{config}", "run"),
        ("{script}", "-c", "{config}", "run"),
        ("/opt/old/bin/galera-checker", "--config={config}", "run", None),
        ("/usr/local/bin/galera-checker", "--config {config}", "run", None),
        ("{script}", "run", "--config={tmp}/../{tmpname}/checker.toml", None),
    ],
)
def test_install_scheduler_finds_the_same_file_however_spelt(
    world: World, filename: str, arg1: str, arg2: str, arg3: str | None
) -> None:
    from checker_core.scheduler import executable
    from galera_checker.cli import build

    names = {
        **world.names,
        "script": executable(Checker.GALERA).path,
        "tmpname": world.tmp.name,
    }
    path = world.tmp / "checker.toml"
    path.write_text(world.fill(render(base_config(world), ())))
    path.chmod(0o600)
    filled = [None if a is None else _fill(a, names) for a in (filename, arg1, arg2, arg3)]
    with admin_cursor(world.lab) as cur:
        cur.execute(
            "INSERT INTO scheduler (active, interval_ms, filename, arg1, arg2, arg3, comment) "
            "VALUES (1, 2000, %s, %s, %s, %s, 'the operator''s own')",
            filled,
        )
        cur.execute("LOAD SCHEDULER TO RUNTIME")
    result = CliRunner().invoke(build(), ["--config", str(path), "install-scheduler", "--apply"])
    assert result.exit_code == 0, result.output
    with admin_cursor(world.lab) as cur:
        cur.execute("SELECT active, filename, arg1, arg2 FROM runtime_scheduler")
        rows = cur.fetchall()
    mine = [r for r in rows if str(r[0]) == "1" and str(path) in " ".join(map(str, r[1:]))]
    assert len(mine) == 1, rows
    assert result.output.startswith("scheduler row updated"), result.output


def _fill(text: str, names: Mapping[str, str]) -> str:
    for name, value in names.items():
        text = text.replace("{" + name + "}", value)
    return text


def test_a_second_row_of_the_same_file_is_switched_off(world: World) -> None:
    from checker_core.scheduler import executable
    from galera_checker.cli import build

    path = world.tmp / "checker.toml"
    path.write_text(world.fill(render(base_config(world), ())))
    path.chmod(0o600)
    script = executable(Checker.GALERA).path
    with admin_cursor(world.lab) as cur:
        for args in ((f"--config={path}", "run"), ("-c", str(path))):
            cur.execute(
                "INSERT INTO scheduler (active, interval_ms, filename, arg1, arg2) "
                "VALUES (1, 2000, %s, %s, %s)",
                (script, *args),
            )
        cur.execute("LOAD SCHEDULER TO RUNTIME")
    result = CliRunner().invoke(build(), ["--config", str(path), "install-scheduler", "--apply"])
    assert result.exit_code == 0, result.output
    assert "ran the same configuration file: set active = 0" in result.output
    with admin_cursor(world.lab) as cur:
        cur.execute("SELECT active FROM runtime_scheduler WHERE filename = %s", (script,))
        assert sorted(str(r[0]) for r in cur.fetchall()) == ["0", "1"]


def test_unix_socket_row_is_not_refused_nor_looked_up_by_name(world: World) -> None:
    """A socket row (port 0) is a node like any other: probed through its socket (nothing
    listens there, so the pass is blind), not a resolver's "Name or service not known"."""
    from galera_checker.cli import build

    path = world.tmp / "checker.toml"
    path.write_text(world.fill(render(base_config(world), ())))
    path.chmod(0o600)
    socket_path = world.tmp / "mysqld.sock"
    with admin_cursor(world.lab) as cur:
        cur.execute("DELETE FROM mysql_servers")
        for statement in _row(str(socket_path), 0, 100):
            cur.execute(statement)
    result = CliRunner().invoke(build(), ["--config", str(path), "status"])
    assert "Traceback" not in result.output
    assert "Name or service not known" not in result.output
    assert "bad_input" not in result.output and "bad input" not in result.output
    assert str(socket_path) in result.output


def test_the_daemon_refuses_a_natively_managed_cluster(world: World) -> None:
    """The daemon's runner (persistent connections) refuses it as a scheduler pass does."""
    from checker_core.passes.result import Mode, Outcome
    from checker_core.passes.runner import PassRunner
    from checker_core.settings.config import load
    from galera_checker.cli import kind

    path = world.tmp / "checker.toml"
    path.write_text(world.fill(render(base_config(world), ())))
    path.chmod(0o600)
    with admin_cursor(world.lab) as cur:
        cur.execute(_NATIVE["gr"])
    before = snapshot(world)
    runner = PassRunner(load(path, Checker.GALERA, env={}), kind(), persistent=True)
    try:
        result = runner.run(Mode.APPLY)
    finally:
        runner.close()
    assert result.outcome is Outcome.BAD_INPUT
    assert "mysql_group_replication_hostgroups (staged) manages hostgroup 100" in result.message
    assert snapshot(world) == before


@pytest.mark.parametrize(
    ("sets", "args", "code", "needle"),
    [
        (
            (("proxysql", "password_file", '"{tmp}/binary.pw"'),),
            ("run",),
            2,
            "proxysql.password_file: {tmp}/binary.pw is not UTF-8 text",
        ),
        (
            (("proxysql", "port", "{banner_port}"),),
            ("check-config",),
            2,
            "does not speak the MySQL protocol",
        ),
        ((), ("--set", "monitor.password=hunter2", "run"), 2, "--set monitor.password: a password"),
        ((), ("healthcheck", "--timeout", "nan"), 2, "--timeout: nan is not a number of seconds"),
    ],
    ids=["binary-password-file", "not-mysql", "secret-on-argv", "healthcheck-nan"],
)
def test_a_real_process_prints_no_traceback(
    world: World, sets: tuple[tuple[str, str, str], ...], args: tuple[str, ...], code: int,
    needle: str,
) -> None:  # fmt: skip
    """The console entry as ProxySQL or a shell starts it (argv, the lean path, the net)."""
    import subprocess
    import sys

    path = world.tmp / "checker.toml"
    path.write_text(world.fill(render(base_config(world), sets)))
    path.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHECKER_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    before = snapshot(world)
    done = subprocess.run(
        [sys.executable, "-m", "galera_checker", f"--config={path}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    output = done.stdout + done.stderr
    assert done.returncode == code, output
    assert "Traceback" not in output
    assert world.fill(needle) in output
    assert "hunter2" not in output
    assert snapshot(world) == before
