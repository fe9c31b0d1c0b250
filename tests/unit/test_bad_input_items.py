"""Issue 19, item by item, where no admin endpoint is needed: every bad input a clear line
naming its key, flag or variable (exit 2), no traceback, no bad value accepted."""

from __future__ import annotations

import math
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from checker_core.core.model import ClusterRows, ServerRow, sort_rows
from checker_core.core.schema import Checker
from checker_core.scheduler import SCHEDULER_ROWS
from checker_core.settings.config import ConfigError, load
from galera_checker.cli import build as build_galera
from tests.unit.config_cases import CONFIG, MAIN_CLUSTER, config_file
from tests.unit.fakes import MemoryAdmin

WriteConfig = Callable[[str], Path]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    def write(text: str) -> Path:
        return config_file(tmp_path, text)

    return write


@pytest.fixture(autouse=True)
def no_checker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.startswith("CHECKER_"):
            monkeypatch.delenv(var)


def problems_of(path: Path, **kwargs: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(path, Checker.GALERA, **{"env": {}, **kwargs})  # type: ignore[arg-type]
    return [str(p) for p in info.value.problems]


# ---------------------------------------------------------------- TLS files at check time


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests.lab.certs import make_cert_set, make_other_ca

    where = tmp_path_factory.mktemp("certs")
    made = make_cert_set(where)
    other_ca = make_other_ca(where)
    encrypted = where / "encrypted-key.pem"
    subprocess.run(
        [
            "openssl",
            "pkey",
            "-in",
            str(made.key),
            "-aes256",
            "-passout",
            "pass:pw",
            "-out",
            str(encrypted),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    garbage = where / "garbage.pem"
    garbage.write_bytes(b"\x00\x01 not a certificate \xff" * 10)
    return {
        "ca": made.ca,
        "cert": made.cert,
        "key": made.key,
        "other_key": other_ca.with_name("other-ca-key.pem"),
        "encrypted": encrypted,
        "garbage": garbage,
    }


def _tls(section: str, lines: str) -> str:
    return CONFIG.replace(f"[{section}]\n", f"[{section}]\n{lines}\n", 1)


@pytest.mark.parametrize("section", ["monitor", "proxysql"])
@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            'ssl_mode = "verify_ca"\nssl_ca = "{garbage}"',
            "{section}.ssl_ca: {garbage}: not a PEM CA certificate",
        ),
        (
            'ssl_mode = "verify_ca"\nssl_ca = "{key}"',
            "{section}.ssl_ca: {key}: not a PEM CA certificate",
        ),
        (
            'ssl_mode = "required"\nssl_cert = "{garbage}"\nssl_key = "{key}"',
            "{section}.ssl_cert: {garbage}: not a PEM certificate",
        ),
        (
            'ssl_mode = "required"\nssl_cert = "{cert}"\nssl_key = "{garbage}"',
            "{section}.ssl_key: {garbage}: not a PEM private key",
        ),
        (
            'ssl_mode = "required"\nssl_cert = "{cert}"\nssl_key = "{other_key}"',
            "{section}.ssl_key: {other_key}: does not belong to the certificate {cert}",
        ),
        (
            'ssl_mode = "required"\nssl_cert = "{cert}"\nssl_key = "{encrypted}"',
            "{section}.ssl_key: {encrypted}: encrypted with a passphrase",
        ),
    ],
)
def test_certificate_files_are_loaded_at_check_time(
    write_config: WriteConfig, certs: dict[str, Path], section: str, lines: str, expected: str
) -> None:
    names = {k: str(v) for k, v in certs.items()}
    (problem,) = problems_of(write_config(_tls(section, lines.format(**names))))
    assert problem.startswith(expected.format(section=section, **names))


def test_good_certificate_files_load(write_config: WriteConfig, certs: dict[str, Path]) -> None:
    lines = f'ssl_mode = "verify_ca"\nssl_ca = "{certs["ca"]}"\n'
    lines += f'ssl_cert = "{certs["cert"]}"\nssl_key = "{certs["key"]}"'
    settings = load(write_config(_tls("monitor", lines)), Checker.GALERA, env={})
    assert settings.monitor.tls.ca == str(certs["ca"])


def test_a_tls_file_spoilt_after_the_check_names_its_key(
    write_config: WriteConfig, certs: dict[str, Path], tmp_path: Path
) -> None:
    """The file changed between the check and the connect: the admin error names the ssl_* key
    and the file (bad input), not "ProxySQL admin unreachable"."""
    from checker_core.edges import tls
    from checker_core.edges.admin_errors import AdminBadEndpoint
    from checker_core.edges.proxysql import AdminClient

    ca = tmp_path / "ca.pem"
    ca.write_bytes(certs["ca"].read_bytes())
    lines = f'ssl_mode = "verify_ca"\nssl_ca = "{ca}"'
    settings = load(write_config(_tls("proxysql", lines)), Checker.GALERA, env={})
    ca.write_text("garbage\n")
    tls.forget()
    try:
        with pytest.raises(AdminBadEndpoint) as info:
            AdminClient.connect(settings.proxysql)
    finally:
        tls.forget()
    assert str(info.value).startswith(f"proxysql.ssl_ca {ca}: ")


# ---------------------------------------------------------------- secrets


def test_wrong_type_password_is_not_echoed_nor_called_missing(write_config: WriteConfig) -> None:
    text = CONFIG.replace('password = "monitor-pw"', "password = 31415926535")
    problems = problems_of(write_config(text))
    assert problems == [
        "monitor.password: expected a string, got a value that is not shown (it is a secret)"
    ]
    assert "31415926535" not in "".join(problems)


def test_wrong_type_password_from_env_is_not_echoed(write_config: WriteConfig) -> None:
    text = CONFIG.replace('password = "monitor-pw"\n', "")
    env = {"CHECKER_MONITOR_PASSWORD": "line\nbreak-pw"}
    problems = problems_of(write_config(text), env=env)
    assert problems == [
        "CHECKER_MONITOR_PASSWORD (monitor.password): holds a line break or NUL character "
        "(not shown)"
    ]


@pytest.mark.parametrize(
    ("setting", "instead"),
    [
        ("monitor.password", "monitor.password_file, or in the environment as "
         "CHECKER_MONITOR_PASSWORD"),
        ("proxysql.password", "proxysql.password_file, or in the environment as "
         "CHECKER_PROXYSQL_PASSWORD"),
    ],
)  # fmt: skip
def test_secret_on_the_command_line_is_refused(
    write_config: WriteConfig, setting: str, instead: str
) -> None:
    path = write_config(CONFIG)
    (problem,) = problems_of(path, overrides=[f"{setting}=hunter2"])
    assert problem.startswith(f"--set {setting}: a password on the command line is visible")
    assert problem.endswith(instead)
    assert "hunter2" not in problem
    result = CliRunner().invoke(
        build_galera(), ["--config", str(path), "--set", f"{setting}=hunter2", "check-config"]
    )
    assert result.exit_code == 2
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output


def test_binary_password_file_is_a_clear_line(write_config: WriteConfig, tmp_path: Path) -> None:
    secret = tmp_path / "pw.bin"
    secret.write_bytes(b"\xff\xfe\x00\x81binary")
    text = CONFIG.replace('password = "admin-pw"', f'password_file = "{secret}"')
    assert problems_of(write_config(text)) == [
        f"proxysql.password_file: {secret} is not UTF-8 text (a binary file?)"
    ]


def test_password_file_warnings(write_config: WriteConfig, tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("pw\n")
    secret.chmod(0o666)
    text = CONFIG.replace('password = "admin-pw"', f'password_file = "{secret}"')
    warnings = load(write_config(text), Checker.GALERA, env={}).warnings
    assert f"proxysql.password_file {secret} is writable by every user: chmod 600 {secret}" in (
        warnings
    )
    relative = CONFIG.replace('password = "admin-pw"', 'password_file = "pw"')
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        warnings = load(write_config(relative), Checker.GALERA, env={}).warnings
    finally:
        os.chdir(cwd)
    assert any(w.startswith("proxysql.password_file pw is relative") for w in warnings)


# ---------------------------------------------------------------- values that know their use


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("writer_hostgroup = 100", "writer_hostgroup = 4294967296"),
            "cluster[0].writer_hostgroup: must be <= 2147483647, got 4294967296",
        ),
        (
            ("writer_hostgroup = 100", "writer_hostgroup = 2147483000"),
            "cluster[0].config_writer_hostgroup: its default 8000 + writer_hostgroup "
            "(2147491000) is above ProxySQL's largest hostgroup id 2147483647",
        ),
        (
            ("reader_hostgroup = 101", "reader_hostgroup = 2147483000"),
            "cluster[0].config_reader_hostgroup: its default 8000 + reader_hostgroup",
        ),
        (
            ("offline_hostgroup = 9100", "offline_hostgroup = 9100\ndrain_timeout_ms = 1e20"),
            "cluster[0].drain_timeout_ms: expected a whole number",
        ),
        (
            ("offline_hostgroup = 9100", "offline_hostgroup = 9100\nmax_transactions_behind = "
             "9999999999"),
            "cluster[0].max_transactions_behind: must be <= 2147483647",
        ),
        (('user = "admin"', 'user = ""'), "proxysql.user: is empty"),
        (('user = "admin"', 'user = "admin\\n"'), "proxysql.user: 'admin\\n' holds a control"),
        (('user = "monitor"', 'user = " "'), "monitor.user: is empty"),
        (
            ("[run]\n", '[run]\nmetrics_listen = "127.0.0.1: 9140"\n'),
            "run.metrics_listen: '127.0.0.1: 9140' holds a space",
        ),
        (('host = "127.0.0.1"', 'host = ""'), "proxysql.host: is empty"),
    ],
)  # fmt: skip
def test_values_that_know_their_use(
    write_config: WriteConfig, edit: tuple[str, str], expected: str
) -> None:
    old, new = edit
    assert old in CONFIG
    (problem,) = problems_of(write_config(CONFIG.replace(old, new, 1)))
    assert problem.startswith(expected)


def test_empty_cluster_list(write_config: WriteConfig) -> None:
    text = "cluster = []\n" + CONFIG.replace(MAIN_CLUSTER, "")
    assert problems_of(write_config(text)) == [
        "cluster: an empty list: at least one [[cluster]] table is required"
    ]


def test_state_dir_under_a_regular_file(write_config: WriteConfig, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    text = CONFIG.replace('state_dir = "{state}"', f'state_dir = "{blocker}/state"')
    assert problems_of(write_config(text)) == [
        f"run.state_dir: {blocker}/state cannot be created: {blocker} is a file, not a directory"
    ]


def test_timeouts_that_cannot_fit_warn(write_config: WriteConfig) -> None:
    text = CONFIG.replace("[run]\n", "[run]\nmax_runtime_ms = 1000\n", 1).replace(
        'password = "monitor-pw"', 'password = "monitor-pw"\nconnect_timeout_ms = 900'
    )
    text = text.replace('password = "admin-pw"', 'password = "admin-pw"\nconnect_timeout_ms = 1000')
    warnings = load(write_config(text), Checker.GALERA, env={}).warnings
    assert any(
        w.startswith("monitor.connect_timeout_ms (900) is not below the probes'")
        and w.endswith(
            "so one pass never judges it silent, only unheard (it keeps its place): a dead "
            "or frozen node is taken out only once its unheard probes in a row add up to "
            "its whole timeout, some passes later"
        )
        for w in warnings
    )
    assert any(
        w.startswith("monitor.read_timeout_ms (800) is not below the probes'") for w in warnings
    )
    assert any(
        w.startswith("monitor.connect_timeout_ms + monitor.read_timeout_ms (1700)")
        for w in warnings
    )
    assert any(w.startswith("proxysql.connect_timeout_ms (1000) is not below") for w in warnings)
    # the default read timeout is above this max_runtime_ms too
    assert any(w.startswith("proxysql.read_timeout_ms (1500) is above") for w in warnings)
    assert load(write_config(CONFIG), Checker.GALERA, env={}).warnings == ()


@pytest.mark.parametrize(
    ("read_timeout_ms", "problem", "warning"),
    [
        ("600000", "proxysql.read_timeout_ms: must be <= 60000, got 600000", None),
        ("60001", "proxysql.read_timeout_ms: must be <= 60000, got 60001", None),
        ("5000", None, "proxysql.read_timeout_ms (5000) is above run.max_runtime_ms (1800): an "
         "admin statement that hangs is cut off by the pass's deadline, not by this timeout"),
        ("1801", None, "proxysql.read_timeout_ms (1801) is above run.max_runtime_ms (1800)"),
        ("1800", None, None),
        (None, None, None),  # the default fits the default pass
    ],
)  # fmt: skip
def test_the_admin_read_timeout_is_bounded_like_the_others(
    write_config: WriteConfig, read_timeout_ms: str | None, problem: str | None, warning: str | None
) -> None:
    line = "" if read_timeout_ms is None else f"\nread_timeout_ms = {read_timeout_ms}"
    text = CONFIG.replace('password = "admin-pw"', f'password = "admin-pw"{line}')
    path = write_config(text)
    if problem is not None:
        assert problems_of(path) == [problem]
        return
    warnings = load(path, Checker.GALERA, env={}).warnings
    if warning is None:
        assert warnings == ()
    else:
        (found,) = warnings
        assert found.startswith(warning)


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = config_file(tmp_path, CONFIG)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load(path, Checker.GALERA, env={}).clusters[0].name == "main"


def test_utf16_file_is_named(tmp_path: Path) -> None:
    path = config_file(tmp_path, CONFIG)
    path.write_bytes(path.read_text().encode("utf-16"))
    assert problems_of(path) == [f"config: {path} is UTF-16 text; save it as UTF-8 (TOML is UTF-8)"]


def test_env_and_set_problems_name_their_origin(write_config: WriteConfig) -> None:
    path = write_config(CONFIG)
    problems = problems_of(
        path,
        env={"CHECKER_RUN_INTERVAL_MS": "soon"},
        overrides=["cluster[0].retry_up=many"],
    )
    assert problems == [
        "CHECKER_RUN_INTERVAL_MS (run.interval_ms): expected a whole number, got 'soon'",
        "--set cluster[0].retry_up (cluster[0].retry_up): expected a whole number, got 'many'",
    ]


# ---------------------------------------------------------------- unix socket rows


def test_unix_socket_row_is_probed_through_the_socket(tmp_path: Path) -> None:
    from checker_core.edges.tls import open_socket

    path = str(tmp_path / "mysqld.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    try:
        client = open_socket(path, 0, 1.0)
        peer, _ = server.accept()
        client.sendall(b"ping")
        assert peer.recv(4) == b"ping"
        client.close()
        peer.close()
    finally:
        server.close()


# ---------------------------------------------------------------- command lines


TWO_CLUSTERS = CONFIG + MAIN_CLUSTER.replace('"main"', '"second"').replace("= 10", "= 20").replace(
    "9100", "9200"
)


def test_pause_several_clusters_pauses_each(write_config: WriteConfig, tmp_path: Path) -> None:
    path = write_config(TWO_CLUSTERS)
    args = ["--config", str(path), "pause", "--cluster", "main", "--cluster", "second"]
    result = CliRunner().invoke(build_galera(), args)
    assert result.exit_code == 0, result.output
    state = tmp_path / "state"
    assert sorted(p.name for p in state.glob("*.paused")) == [
        "galera.main.paused",
        "galera.second.paused",
    ]
    resumed = CliRunner().invoke(
        build_galera(),
        ["--config", str(path), "resume", "--cluster", "main", "--cluster", "second"],
    )
    assert resumed.exit_code == 0
    assert list(state.glob("*.paused")) == []


def test_pause_with_one_unknown_cluster_pauses_none(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    path = write_config(TWO_CLUSTERS)
    args = ["--config", str(path), "pause", "--cluster", "main", "--cluster", "nope"]
    result = CliRunner().invoke(build_galera(), args)
    assert result.exit_code == 2
    assert result.output.startswith("--cluster nope: no such cluster")
    assert not (tmp_path / "state").exists() or list((tmp_path / "state").iterdir()) == []


@pytest.mark.parametrize("timeout", ["-1", "nan", "0", "inf"])
def test_healthcheck_bad_timeout(timeout: str) -> None:
    result = CliRunner().invoke(
        build_galera(), ["healthcheck", "--listen", "127.0.0.1:1", "--timeout", timeout]
    )
    assert result.exit_code == 2
    assert result.output.startswith(f"--timeout: {float(timeout)} is not a number of seconds")
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not math.isnan(0.0)


@pytest.fixture
def banner_server() -> Iterator[int]:
    """A TCP service that speaks first, and not HTTP nor MySQL (an SSH-like banner)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()
        thread.join(timeout=5)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts (the kernel's backlog) and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def test_healthcheck_pointed_at_a_non_http_service(banner_server: int) -> None:
    listen = f"127.0.0.1:{banner_server}"
    result = CliRunner().invoke(build_galera(), ["healthcheck", "--listen", listen])
    assert result.exit_code == 1
    assert result.output.startswith(f"http://{listen}/health: the service there does not answer")
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_admin_port_that_is_not_mysql(write_config: WriteConfig, banner_server: int) -> None:
    path = write_config(CONFIG.replace("port = 6032", f"port = {banner_server}"))
    for command in ("check-config", "adopt", "run"):
        result = CliRunner().invoke(build_galera(), ["--config", str(path), command])
        assert result.exit_code == 2, (command, result.output)
        assert "the service on proxysql.port does not speak the MySQL protocol" in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), command


def test_admin_that_never_answers(write_config: WriteConfig, silent_server: int) -> None:
    from checker_core.edges.admin_errors import AdminUnreachable
    from checker_core.edges.proxysql import AdminClient

    text = CONFIG.replace("port = 6032", f"port = {silent_server}\nconnect_timeout_ms = 200")
    settings = load(write_config(text), Checker.GALERA, env={})
    with pytest.raises(AdminUnreachable) as info:
        AdminClient.connect(settings.proxysql)
    assert "connected, but no MySQL greeting within proxysql.connect_timeout_ms (200 ms)" in str(
        info.value
    )


# ---------------------------------------------------------------- install-scheduler


def test_install_scheduler_says_what_the_row_drops(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(CONFIG)
    monkeypatch.setenv("CHECKER_RUN_LOG_LEVEL", "debug")
    args = ["--config", str(path), "--set", "cluster[0].retry_down=3", "install-scheduler"]
    result = CliRunner().invoke(build_galera(), args)
    assert result.exit_code == 0, result.output
    assert "warning: --set cluster[0].retry_down not in the scheduler row" in result.output
    assert "warning: CHECKER_RUN_LOG_LEVEL not in the scheduler row" in result.output


def test_install_scheduler_names_this_installation_not_paths_first(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from checker_core import scheduler

    older = tmp_path / "old-bin"
    older.mkdir()
    script = older / "galera-checker"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    mine = tmp_path / "venv-bin"
    mine.mkdir()
    (mine / "galera-checker").write_text("#!/bin/sh\nexit 0\n")
    (mine / "galera-checker").chmod(0o755)
    monkeypatch.setenv("PATH", str(older))
    monkeypatch.setattr(sys, "executable", str(mine / "python3"))
    monkeypatch.setattr(sys, "argv", [str(ROOT / "galera_checker" / "__main__.py")])
    found = scheduler.executable(Checker.GALERA)
    assert found == scheduler.Executable(str(mine / "galera-checker"), str(script))
    result = CliRunner().invoke(build_galera(), ["--config", str(write_config(CONFIG)),
                                                 "install-scheduler"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"warning: PATH's first galera-checker is {script}, another installation" in (
        result.output
    )
    assert f"'{mine / 'galera-checker'}'" in result.output


def test_install_scheduler_without_any_script_is_one_line(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setattr(sys, "argv", ["__main__.py"])
    result = CliRunner().invoke(
        build_galera(), ["--config", str(write_config(CONFIG)), "install-scheduler"]
    )
    assert result.exit_code == 2
    assert result.output.startswith("no galera-checker script beside this Python")
    assert "install the package" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_python_m_install_scheduler_without_bin_on_path(write_config: WriteConfig) -> None:
    """As `python -m galera_checker install-scheduler` from a venv whose bin is not on PATH:
    the row names the script beside that Python, and no traceback."""
    beside = Path(sys.executable).parent / "galera-checker"
    if not beside.is_file():
        pytest.skip(f"no galera-checker beside {sys.executable} (the package is not installed)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHECKER_")}
    env.update(PATH="/usr/bin:/bin", PYTHONPATH=str(ROOT))
    path = write_config(CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "galera_checker", "--config", str(path), "install-scheduler"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"'{beside.resolve()}'" in done.stdout


def test_scheduler_row_spellings() -> None:
    from checker_core.scheduler import config_named

    for args in (
        ["--config=/etc/c.toml", "run"],
        ["--config", "/etc/c.toml", "run"],
        ["-c", "/etc/c.toml", "run"],
        ["-c/etc/c.toml", "run"],
        ["--config /etc/c.toml", "run"],
        ["run", "--config=/etc/c.toml"],
    ):
        assert config_named([*args, None, None]) == "/etc/c.toml", args
    assert config_named(["run", None]) is None


# ------------------------------------------------- install-scheduler beside other checkers


class SchedulerAdmin(MemoryAdmin):
    """ProxySQL's admin holding `scheduler` rows (id, active, filename, arg1..arg5)."""

    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        super().__init__(())
        self.scheduler = rows

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if sql == SCHEDULER_ROWS:
            self.sent.append(sql)
            return list(self.scheduler)
        return super().execute(sql, params)


def _row(row_id: int, active: int, filename: str, *args: str) -> tuple[object, ...]:
    padded = [*args, *([None] * (5 - len(args)))]
    return (row_id, active, filename, *padded)


@dataclass(frozen=True)
class Beside:
    name: str
    rows: Callable[[Path], list[tuple[object, ...]]]  # given the configuration file
    code: int
    said: str  # a line of the output, "{config}" the file's resolved path
    writes: bool


BESIDE = [
    Beside(
        "an active gr-checker row on the same file",
        lambda c: [_row(7, 1, "/usr/local/bin/gr-checker", "-c", str(c), "run")],
        2,
        "scheduler row id 7 (/usr/local/bin/gr-checker) is active and runs gr-checker on the "
        "same configuration file {config}: two checkers would manage the same hostgroups",
        False,
    ),
    Beside(
        "an active gr-checker module row on the same file",
        lambda c: [_row(3, 1, "/usr/bin/python3", "-m", "gr_checker", f"--config={c}", "run")],
        2,
        "scheduler row id 3 (/usr/bin/python3) is active and runs gr-checker",
        False,
    ),
    Beside(
        "an inactive gr-checker row on the same file",
        lambda c: [_row(7, 0, "/usr/local/bin/gr-checker", f"--config={c}", "run")],
        0,
        "scheduler row inserted",
        True,
    ),
    Beside(
        "an active gr-checker row on another file",
        lambda c: [_row(7, 1, "/usr/local/bin/gr-checker", "--config=/etc/other.toml", "run")],
        0,
        "scheduler row inserted",
        True,
    ),
    Beside(
        "this checker's own active row is replaced",
        lambda c: [_row(4, 1, "/opt/old/galera-checker", f"--config={c}", "run")],
        0,
        "scheduler row updated (id 4)",
        True,
    ),
    Beside(
        "Percona's legacy checker active",
        lambda c: [_row(2, 1, "/var/lib/proxysql/proxysql_galera_checker.sh", "10", "11")],
        0,
        "warning: scheduler row id 2 (/var/lib/proxysql/proxysql_galera_checker.sh) is active "
        "and runs proxysql_galera_checker.sh, Percona's checker: it manages hostgroups too",
        True,
    ),
    Beside(
        "Percona's legacy checker under its interpreter",
        lambda c: [_row(5, 1, "/usr/bin/perl", "/var/lib/proxysql/galera_check.pl", "-H 10:W")],
        0,
        "warning: scheduler row id 5 (/usr/bin/perl) is active and runs galera_check.pl",
        True,
    ),
    Beside(
        "pxc_scheduler_handler active",
        lambda c: [_row(9, 1, "/usr/bin/pxc_scheduler_handler", "--configfile=x.toml")],
        0,
        "warning: scheduler row id 9 (/usr/bin/pxc_scheduler_handler) is active and runs "
        "pxc_scheduler_handler",
        True,
    ),
]


@pytest.mark.parametrize("case", BESIDE, ids=[c.name for c in BESIDE])
def test_install_scheduler_beside_other_checkers(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, case: Beside
) -> None:
    """A row of the other checker active on the same configuration file is refused in one line
    naming it, and nothing is written; Percona's checkers active warn; an inactive row, another
    file's, or this checker's own (replaced) is no refusal."""
    from checker_core import scheduler
    from checker_core.edges.proxysql import AdminClient

    path = write_config(CONFIG)
    admin = SchedulerAdmin(case.rows(path))
    monkeypatch.setattr(AdminClient, "connect", classmethod(lambda cls, _s, _deadline=None: admin))
    script = scheduler.Executable("/usr/local/bin/galera-checker")
    monkeypatch.setattr(scheduler, "executable", lambda _c: script)
    done = CliRunner().invoke(
        build_galera(), ["--config", str(path), "install-scheduler", "--apply"]
    )
    said = case.said.replace("{config}", str(path.resolve()))
    assert done.exit_code == case.code, done.output
    assert said in done.output
    assert bool(admin.writes()) == case.writes, admin.sent
    if case.code:
        assert done.output.strip().splitlines() == [done.output.strip()]
        assert done.output.strip().endswith("; nothing changed")
    else:
        assert "LOAD SCHEDULER TO RUNTIME" in admin.writes()


@pytest.mark.parametrize("case", [c for c in BESIDE if c.code or "warning" in c.said],
                         ids=lambda c: c.name)  # fmt: skip
def test_check_config_warns_of_the_scheduler_rows_beside_it(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, case: Beside
) -> None:
    """What install-scheduler refuses or warns of, check-config warns of when it reads ProxySQL,
    and writes nothing."""
    from checker_core.edges.proxysql import AdminClient

    path = write_config(CONFIG)
    admin = SchedulerAdmin(case.rows(path))
    monkeypatch.setattr(AdminClient, "connect", classmethod(lambda cls, _s, _deadline=None: admin))
    done = CliRunner().invoke(build_galera(), ["--config", str(path), "check-config"])
    said = case.said.replace("{config}", str(path.resolve())).removeprefix("warning: ")
    assert f"warning: {said}" in done.output, done.output
    assert not admin.writes()


# ---------------------------------------------------------------- a row's port


def _raw(hostgroup: int, host: str, port: int) -> tuple[object, ...]:
    """A row as ProxySQL's admin answers it: every column a string."""
    return (str(hostgroup), host, str(port), "0", "ONLINE", "1000", "0", "1000", "0", "0", "0", "")


@pytest.mark.parametrize(
    ("host", "port", "problem"),
    [
        ("db1", 0, "port 0 beside the network host 'db1': a TCP port is 1-65535 (port 0 is only "
         "for a unix socket path)"),
        ("10.0.0.5", 0, "port 0 beside the network host '10.0.0.5'"),
        ("::1", 0, "port 0 beside the network host '::1'"),
        ("db1", 70000, "port 70000 is not a TCP port (1-65535)"),
        ("db1", -1, "port -1 is not a TCP port (1-65535)"),
        ("/var/run/mysqld/mysqld.sock", 0, None),
        ("db1", 3306, None),
        ("db1", 65535, None),
    ],
)  # fmt: skip
def test_a_row_port_that_reaches_no_server_names_the_row(
    host: str, port: int, problem: str | None
) -> None:
    from checker_core.core.model import BadRow, ServerRow

    raw = _raw(101, host, port)
    if problem is None:
        assert ServerRow.from_admin(raw).node.port == port
        return
    with pytest.raises(BadRow) as info:
        ServerRow.from_admin(raw)
    assert str(info.value).startswith(f"row (101, {host}, {port}): {problem}")


class RawRowsAdmin(MemoryAdmin):
    """An admin whose rows are parsed from what ProxySQL answers, as AdminClient parses them."""

    def __init__(self, raw: list[tuple[object, ...]]) -> None:
        super().__init__(())
        self.raw = raw

    def read_rows(self, hostgroups: Iterable[int]) -> ClusterRows:
        wanted = set(hostgroups)
        rows = sort_rows(ServerRow.from_admin(r) for r in self.raw if int(str(r[0])) in wanted)
        return ClusterRows(rows, rows)


@pytest.mark.parametrize("command", ["run", "check-config", "status", "adopt"])
def test_a_port_0_row_is_refused_alike_by_every_command(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """check-config says what run says of a row no pass can use: the row, exit 2, nothing
    written."""
    from checker_core.edges.proxysql import AdminClient

    path = write_config(CONFIG)
    admin = RawRowsAdmin([_raw(8100, "db1", 3306), _raw(8101, "db1", 3306), _raw(101, "db2", 0)])
    monkeypatch.setattr(AdminClient, "connect", classmethod(lambda cls, _s, _deadline=None: admin))
    done = CliRunner().invoke(build_galera(), ["--config", str(path), command])
    assert done.exit_code == 2, done.output
    assert "row (101, db2, 0): port 0 beside the network host 'db2'" in done.output
    assert not admin.writes()


# ---------------------------------------------------------------- the net


def test_last_resort_is_one_line_and_a_pointer_to_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from checker_core import oneshot
    from galera_checker.cli import kind

    def broken() -> Callable[[], object]:
        def run() -> object:
            raise RuntimeError("something nobody foresaw")

        return run

    codes: list[int] = []

    def record(code: int) -> None:
        codes.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(oneshot, "exit_now", record)
    monkeypatch.setattr(sys, "argv", ["galera-checker", "status"])
    with pytest.raises(SystemExit):
        oneshot.entry(Checker.GALERA, kind, broken)
    err = capsys.readouterr().err
    assert codes == [1]
    assert err == (
        "galera-checker: internal error: RuntimeError: something nobody foresaw; run it again "
        "with --debug for the traceback, and report it\n"
    )
    monkeypatch.setattr(sys, "argv", ["galera-checker", "--debug", "status"])
    with pytest.raises(RuntimeError):
        oneshot.entry(Checker.GALERA, kind, broken)


def test_config_that_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert problems_of(fifo) == [f"config: {fifo} is not a regular file"]


@pytest.mark.parametrize(
    "args",
    [
        ["--config", "", "check-config"],
        ["-c", "", "run"],
        ["--config=", "status"],
        ["check-config", "-c", ""],
        ["install-scheduler", "--config="],
    ],
)
def test_an_empty_config_path_is_named_as_such(args: list[str], tmp_path: Path) -> None:
    """Not "'.' is a directory": a Path of "" is the current directory."""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(build_galera(), args)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 2, result.output
    assert result.output == "--config: empty path\n"
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------- a state directory not writable


@pytest.mark.parametrize(
    ("made", "denied", "said"),
    [
        (("state",), (), None),
        ((), (), None),  # missing: the pass makes it in a parent it may write
        (("state",), ("state",), "({tmp}/state is not writable by this user)"),
        ((), ("",), "({tmp} is not writable by this user)"),
        (("state", "state/galera.main.lock"), ("state/galera.main.lock",),
         "({tmp}/state/galera.main.lock is not writable by this user)"),
        (("state", "state/galera.other.lock"), ("state/galera.other.lock",), None),
    ],
)  # fmt: skip
def test_a_state_directory_a_pass_cannot_write_is_named(
    tmp_path: Path, made: tuple[str, ...], denied: tuple[str, ...], said: str | None
) -> None:
    """What an applying pass needs of run.state_dir, asked of the filesystem (os.access, here a
    fake saying which paths are not writable) without writing anything."""
    from checker_core.edges.memory import unwritable

    for name in made:
        where = tmp_path / name
        where.mkdir() if name == "state" else where.write_text("1\n")
    refused = {tmp_path / name if name else tmp_path for name in denied}
    before = sorted(tmp_path.rglob("*"))
    state = tmp_path / "state"
    found = unwritable(state, [state / "galera.main.lock"], lambda path, _mode: path not in refused)
    assert sorted(tmp_path.rglob("*")) == before
    if said is None:
        assert found is None
    else:
        expected = said.replace("{tmp}", str(tmp_path))
        assert found == f"run.state_dir {state}: cannot create or write its lock file {expected}"


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """Makes a path this process cannot write: mode bits, or for root (whom they do not stop)
    the immutable attribute, where the filesystem has one."""
    made: list[Path] = []

    def make(path: Path) -> None:
        if os.geteuid() != 0:
            path.chmod(0o555 if path.is_dir() else 0o444)
        else:
            made_immutable = (
                shutil.which("chattr") is not None
                and not (
                    subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True)
                ).returncode
            )
            if not made_immutable:
                pytest.skip("root, and no immutable attribute here")
        made.append(path)
        assert not os.access(path, os.W_OK)

    yield make
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(0o755)


@pytest.mark.parametrize("what", ["directory", "lock file"])
def test_check_config_refuses_a_state_directory_run_refuses(
    write_config: WriteConfig, tmp_path: Path, read_only: Callable[[Path], None], what: str
) -> None:
    """check-config passed while every run refused: both now say the same of run.state_dir."""
    path = write_config(CONFIG)
    state = tmp_path / "state"
    state.mkdir()
    if what == "directory":
        read_only(state)
    else:
        (state / "galera.main.lock").write_text("")
        read_only(state / "galera.main.lock")
    # the run's reason is the OS's (EACCES, or EPERM for an immutable path)
    said = f"run.state_dir {state}: cannot create or write its lock file ("
    checked = CliRunner().invoke(build_galera(), ["--config", str(path), "check-config"])
    assert checked.exit_code == 2, checked.output
    assert checked.output.splitlines() == [f"{path}: 1 problem(s):", checked.output.splitlines()[1]]
    assert said in checked.output
    ran = CliRunner().invoke(build_galera(), ["--config", str(path), "run"])
    assert ran.exit_code == 2, ran.output
    assert said in ran.output
