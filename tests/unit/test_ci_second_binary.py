"""CI runs the integration tier once more against each ProxySQL 3.x, but not the files it lists
as talking to no ProxySQL: each of them must still exist and use no ProxySQL (its fixtures, its
marker, the lab's ProxySQL, the simulated world), or a 3.x would go untested there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
USES_PROXYSQL = re.compile(
    r"proxysql_admin|proxysql_lab|private_proxysql|mark\.proxysql|ProxySQLLab|AdminClient"
    r"|tests\.world\.run|PROXYSQL_BIN"
)


def listed(ci: str) -> list[str]:
    found = re.search(r"no_proxysql=\(([^)]*)\)", ci)
    assert found is not None, ".ci/run names the files a second binary cannot change"
    return found.group(1).split()


def using_proxysql(names: list[str]) -> list[str]:
    return [
        n for n in names if USES_PROXYSQL.search((ROOT / f"tests/integration/{n}.py").read_text())
    ]


def test_the_files_run_once_exist_and_use_no_proxysql() -> None:
    names = listed((ROOT / ".ci" / "run").read_text())
    assert names, "the list is read"
    assert all((ROOT / f"tests/integration/{n}.py").is_file() for n in names)
    assert using_proxysql(names) == []


def test_a_file_that_uses_proxysql_is_found() -> None:
    assert using_proxysql(["test_tls", "test_simnodes"]) == ["test_tls"]


def test_the_files_run_on_2x_only_exist_and_are_few() -> None:
    """The daemon-only files CI runs on 2.x alone: each exists (a renamed one would silently
    run on 3.x again, or a typo skip nothing), and the list stays short."""
    found = re.search(r"same_passes=\(([^)]*)\)", (ROOT / ".ci" / "run").read_text())
    assert found is not None
    names = found.group(1).split()
    assert 0 < len(names) <= 3
    assert all((ROOT / f"tests/integration/{n}.py").is_file() for n in names)
