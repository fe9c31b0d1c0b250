"""The scheduler's `run` imports only what a pass needs: no click, no structlog, no Prometheus
client, no cryptography (until an account logs in with RSA), no thread pool, none of the
daemon's service side or its probing on kept connections, and no ProxySQL Cluster rule until
the proxy turns out to have peers (every record a module defines costs its start)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checker_core.oneshot import RunLine, parse
from tests.unit.config_cases import MAIN_CLUSTER, config_file

NOT_ON_THE_RUN_PATH = (
    "click",
    "structlog",
    "prometheus_client",
    "cryptography",
    "concurrent.futures",
    "difflib",
    "checker_core.service",
    "checker_core.core.peers",
    "checker_core.edges.proxysql_peers",
    "checker_core.core.brownout",
    # the daemon's: probes on kept connections, many at once, and what a steady pass keeps
    "checker_core.edges.exchange",
    "checker_core.passes.kept",
    "checker_core.core.steady",
)

CONFIG = (
    """
[proxysql]
port = {port}
password = "admin-pw"
[monitor]
password = "monitor-pw"
[run]
state_dir = "{state}"
log_format = "json"
"""
    + MAIN_CLUSTER
)

# runs what the console script's main() runs for ProxySQL's scheduler row, then lists what the
# process imported (main() itself ends the process at once)
PROGRAM = """
import sys
from checker_core import oneshot
from {package}.cli import kind
code = oneshot.main(["--config={config}", "run"], oneshot_checker, kind)
print(code)
print(" ".join(sorted(sys.modules)))
"""


def python_in_checkout(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """This interpreter run with `args` in a fresh process, from the checkout's root."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
        cwd=Path(__file__).resolve().parents[2],
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    # a port nothing listens on: the pass connects, is refused, and ends with exit code 1
    from tests.lab.process import free_port

    return config_file(tmp_path, CONFIG.format(port=free_port(), state="{state}"))


@pytest.mark.parametrize(
    ("package", "checker"), [("galera_checker", "GALERA"), ("gr_checker", "GR")]
)
def test_run_path_leaves_daemon_and_cli_machinery_unimported(
    config: Path, package: str, checker: str
) -> None:
    program = "from checker_core.core.schema import Checker\n" + PROGRAM.format(
        config=config, package=package
    ).replace("oneshot_checker", f"Checker.{checker}")
    done = python_in_checkout("-c", program)
    code, modules = done.stdout.splitlines()
    assert code == "1", done.stderr  # the admin refused: the pass ran to its connect
    assert "unreachable" in done.stderr
    imported = set(modules.split())
    assert "pymysql.connections" in imported  # the path was walked, not just read
    found = sorted(
        m for m in imported if m.split(".")[0] in NOT_ON_THE_RUN_PATH or m in NOT_ON_THE_RUN_PATH
    )
    assert found == []


def test_cryptography_is_loaded_when_a_login_needs_it() -> None:
    program = """
import sys
from checker_core.edges import driver
driver.load()
print("cryptography" in sys.modules)
import pymysql._auth
print(pymysql._auth._have_cryptography)
print(driver.enable_rsa(), pymysql._auth._have_cryptography, driver.enable_rsa())
"""
    done = python_in_checkout("-c", program, check=True)
    assert done.stdout.splitlines() == ["False", "False", "True True True"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--config=/c.toml", "run"], RunLine(Path("/c.toml"), ())),
        (["-c", "/c.toml", "run"], RunLine(Path("/c.toml"), ())),
        (["run", "--config", "/c.toml"], RunLine(Path("/c.toml"), ())),
        (["--config=/a", "run", "--config=/b"], RunLine(Path("/b"), ())),
        (
            ["--set", "run.log_level=debug", "run", "--set=cluster[0].retry_up=2"],
            RunLine(None, ("run.log_level=debug", "cluster[0].retry_up=2")),
        ),
        (["run"], RunLine(None, ())),
        # everything else is click's to read and judge
        (["--config=/c.toml", "run", "--dry-run"], None),
        (["--config=/c.toml", "status"], None),
        (["run", "--help"], None),
        (["--help"], None),
        ([], None),
        (["run", "run"], None),
        (["--config", "run"], None),
        (["--config="], None),
        (["--config=", "run"], None),
        (["-c/c.toml", "run"], None),
        (["--verbose", "run"], None),
    ],
)
def test_plain_run_lines(argv: list[str], expected: RunLine | None) -> None:
    assert parse(argv) == expected


def test_bad_input_without_click_reads_as_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from checker_core import oneshot
    from checker_core.core.schema import Checker
    from galera_checker.cli import build, kind

    path = tmp_path / "bad.toml"
    path.write_text(CONFIG.format(port=70000, state=tmp_path / "state"))
    assert oneshot.main([f"--config={path}", "run"], Checker.GALERA, kind) == 2
    lean = capsys.readouterr().err
    assert lean == f"{path}: 1 problem(s):\n  proxysql.port: must be <= 65535, got 70000\n"
    clicked = CliRunner().invoke(build(), [f"--config={path}", "run"])
    assert (clicked.exit_code, clicked.output) == (2, lean)
    monkeypatch.delenv("CHECKER_CONFIG", raising=False)
    assert oneshot.main(["run"], Checker.GALERA, kind) == 2
    assert "no configuration file" in capsys.readouterr().err


def test_the_program_ends_with_the_pass_code_and_its_log_line(config: Path) -> None:
    done = python_in_checkout("-m", "galera_checker", f"--config={config}", "run")
    assert done.returncode == 1
    [line] = [json.loads(x) for x in done.stderr.splitlines() if x.startswith("{")]
    assert (line["event"], line["outcome"]) == ("pass", "failed")


# a whole pass, with a proxy that lists no ProxySQL Cluster peers: the peer rule stays unloaded
WITHOUT_PEERS = """
import sys
from pathlib import Path
from checker_core.passes.result import Mode
from tests.unit.galera_cases import N1, rows_of, steady
from tests.unit.test_overlapped_probes import recording_runner
runner, _, events = recording_runner(Path(sys.argv[1]), False, rows_of(steady(N1)), "auto")
result = runner.run(Mode.APPLY)
print(result.outcome.label, result.role.label, " ".join(events).count("admin query"))
print(" ".join(sorted(sys.modules)))
"""


def test_a_pass_on_a_proxy_without_peers_never_loads_the_peer_rule(tmp_path: Path) -> None:
    done = python_in_checkout("-c", WITHOUT_PEERS, str(tmp_path))
    summary, modules = done.stdout.splitlines()
    assert summary == "unchanged alone 1", done.stderr  # it asked its proxy, once
    imported = set(modules.split())
    assert "checker_core.passes.runner" in imported
    assert "checker_core.core.peers" not in imported
    assert "checker_core.core.brownout" not in imported
    # nor what only an older version's leftover delay record needs (none in its state dir)
    assert "checker_core.edges.proxysql_sessions" not in imported
    assert "checker_core.core.attached" not in imported


def test_a_thread_loading_the_driver_while_another_imports_it_gets_the_whole_module() -> None:
    """A status pass probes the nodes on threads while the main thread reaches ProxySQL: the
    first to load PyMySQL imports it, and the others must not be handed the half-made module
    that sys.modules holds meanwhile."""
    program = """
import sys, threading, time
from checker_core.edges import driver
importing = threading.Thread(target=driver.load)
importing.start()
deadline = time.monotonic() + 30
while "pymysql" not in sys.modules and time.monotonic() < deadline:
    pass
print(importing.is_alive(), hasattr(driver.load(), "connect"))
"""
    done = python_in_checkout("-c", program, check=True)
    assert done.stdout.split() == ["True", "True"], "asked while the import was under way"


# the console script's main() with the fleet and the click group replaced by recorders: whether
# the cyclic collector is on, and the loaded objects set aside from it, where each step runs
COLLECTOR = """
import gc, sys
from checker_core import oneshot
import galera_checker.cli as cli

seen = []
def state(step):
    seen.append(f"{step} on={gc.isenabled()} frozen={gc.get_freeze_count() > 0}")

class Fleet:
    def run_all(self, mode):
        state("pass")
        return []
    def finish(self):
        return ()
    def close(self):
        pass

real_kind = cli.kind
def kind():
    state("loading")
    return real_kind()
cli.kind = kind
oneshot.new_fleet = lambda settings, kind, assumed=None: Fleet()
cli.build = lambda: (lambda: state("command"))
oneshot.exit_now = lambda code: (print(" | ".join(seen)), sys.exit(0))
sys.argv = ["galera-checker", *sys.argv[1:]]
cli.main()
print(" | ".join(seen))
"""


def test_the_program_loads_with_the_collector_off_and_works_with_it_on(config: Path) -> None:
    run = python_in_checkout("-c", COLLECTOR, f"--config={config}", "run")
    expected = "loading on=False frozen=False | pass on=True frozen=True"
    assert run.stdout.strip() == expected, run.stderr
    other = python_in_checkout("-c", COLLECTOR, f"--config={config}", "check-config")
    assert other.stdout.strip() == "command on=True frozen=True", other.stderr
