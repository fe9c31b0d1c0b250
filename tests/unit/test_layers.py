"""The import graph has no circle: a module is never, through others, its own importer (imports
made only for type checking do not count). The layers themselves are lint-imports' contracts in
pyproject.toml, run by tests/run.sh; a copy of the tree with an import up the layers shows they
catch one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

PACKAGES = ("checker_core", "galera_checker", "gr_checker")
ROOT = Path(__file__).resolve().parents[2]


def circles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """One chain for each import that starts a circle: imported -> ... -> importer."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                found.append((importer, *back))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True, cache_dir=None)


def test_no_module_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    assert circles(graph) == []


def test_a_circle_is_found() -> None:
    made = grimp.ImportGraph()
    for importer, imported in (("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.w", "a.x")):
        made.add_import(importer=importer, imported=imported)
    assert ("a.x", "a.y", "a.z", "a.x") in circles(made)
    assert all(chain[0] != "a.w" for chain in circles(made))


LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with pyproject.toml's contracts on the packages under `root`."""
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_layer_contracts_fail_on_an_import_up_the_layers(tmp_path: Path) -> None:
    """The contracts CI runs are no formality: a pure module that imports the runner (a copy
    of the tree, one line added) breaks the layers and the gate's own contract."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert lint_imports(tmp_path).returncode == 0, "the copy keeps the contracts as it is"
    gate = tmp_path / "checker_core" / "passes" / "gate.py"
    gate.write_text(gate.read_text() + "\nfrom checker_core.passes.runner import PassRunner\n")
    broken = lint_imports(tmp_path)
    assert broken.returncode == 1
    assert "checker_core's layers: no arrow up BROKEN" in broken.stdout
    assert "checker_core.passes.gate -> checker_core.passes.runner" in broken.stdout
