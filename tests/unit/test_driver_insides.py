"""PyMySQL's connection has no accessor for its socket, timeouts or TLS flag: edges/driver.py is
the one module that reaches into it, so that a PyMySQL that renames one breaks one module."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_sizes import ROOT, product_files

# the private names of PyMySQL's Connection the product relies on
INSIDES = re.compile(
    r"""[."'](_sock|_rfile|_read_timeout|_write_timeout|_current_timeout|_ssl_required)\b"""
)
DRIVER = ROOT / "checker_core" / "edges" / "driver.py"


def reaching_in(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if INSIDES.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_only_the_driver_module_reaches_into_a_pymysql_connection() -> None:
    assert reaching_in([p for p in product_files() if p != DRIVER]) == []


def test_the_driver_module_is_where_they_are() -> None:
    assert reaching_in([DRIVER]), "the driver names the insides it reaches"
