"""The import graph has no circle: a module is never, through others, its own importer (imports
made only for type checking do not count). The layers themselves are lint-imports' contracts in
pyproject.toml, run by tests/run.sh."""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("checker_core", "galera_checker", "gr_checker")


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
