"""The systemd units in config/systemd: `systemd-analyze verify` finds nothing to say, and what
they start is what the program offers (command, config, state dir, notify, reload)."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from checker_core.core.keys import KEYS
from checker_core.core.schema import Checker
from tests.lab.require import unavailable

UNITS = Path(__file__).resolve().parents[2] / "config" / "systemd"
CHECKERS = [Checker.GALERA, Checker.GR]


def unit_path(checker: Checker) -> Path:
    return UNITS / f"{checker.command}.service"


def service(checker: Checker) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(unit_path(checker))
    return parser["Service"]


def installed(command: str) -> str:
    found = shutil.which(command)
    assert found is not None, f"{command} is not installed (pip install -e .)"
    return str(Path(found).resolve())


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.command)
def test_systemd_analyze_verify_is_silent(checker: Checker, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is not installed (Debian package systemd)")
    text = unit_path(checker).read_text()
    program = shlex.split(service(checker)["ExecStart"])[0]
    # verify insists the program exists: point it at the installed one, change nothing else
    copy = tmp_path / unit_path(checker).name
    copy.write_text(text.replace(program, installed(checker.command), 1))
    assert copy.read_text().count(installed(checker.command)) == 1
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # unknown keys only warn (exit 0), so any output at all is a failure
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.command)
def test_unit_runs_the_daemon_as_systemd_expects(checker: Checker) -> None:
    unit = service(checker)
    argv = shlex.split(unit["ExecStart"])
    assert Path(argv[0]).name == checker.command
    assert argv[1] == "--config" and argv[2].startswith("/etc/proxysql-checkers/")
    assert argv[3:] == ["daemon"]
    # the command line parses: the group takes --config and offers `daemon`
    done = subprocess.run(
        [installed(checker.command), "--config", argv[2], "daemon", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert unit["Type"] == "notify"
    assert unit["ExecReload"].endswith("-HUP $MAINPID")
    assert unit["Restart"] == "on-failure"
    assert unit["RestartPreventExitStatus"] == "2", "a bad config must not restart in a loop"
    assert unit["User"] not in ("", "root", "0")


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.command)
def test_state_directory_is_the_default_state_dir(checker: Checker) -> None:
    default = next(k.default for k in KEYS if (k.section, k.name) == ("run", "state_dir"))
    assert f"/var/lib/{service(checker)['StateDirectory']}" == default


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.command)
def test_watchdog_leaves_two_default_intervals(checker: Checker) -> None:
    interval_ms = next(k.default for k in KEYS if (k.section, k.name) == ("run", "interval_ms"))
    assert isinstance(interval_ms, int)
    watchdog_s = int(service(checker)["WatchdogSec"])
    assert watchdog_s * 1000 >= 2 * interval_ms
