"""A state directory the pass cannot create or write is bad input (exit 2), named, before any
connection is made."""

from __future__ import annotations

from pathlib import Path

from checker_core.config import load
from checker_core.exitcodes import Exit
from checker_core.runner import Mode, Outcome, PassRunner
from checker_core.settings_schema import Checker
from galera_checker.cli import kind

CONFIG = """
[proxysql]
port = 1
password = "x"
[monitor]
password = "y"
[run]
state_dir = "{state}"
[[cluster]]
name = "main"
writer_hostgroup = 100
reader_hostgroup = 101
backup_writer_hostgroup = 102
offline_hostgroup = 9100
"""


def test_unusable_state_dir_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = tmp_path / "checker.toml"
    path.write_text(CONFIG.replace("{state}", str(blocker / "state")))
    path.chmod(0o600)
    settings = load(path, Checker.GALERA, env={})
    runner = PassRunner(settings, kind())
    try:
        (result,) = runner.run_all(Mode.APPLY)
    finally:
        runner.close()
    assert result.outcome is Outcome.BAD_INPUT
    assert result.outcome.exit_code is Exit.BAD_INPUT
    assert f"run.state_dir {blocker / 'state'}: cannot create or write" in result.message
