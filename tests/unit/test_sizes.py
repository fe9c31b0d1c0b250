"""The product's sizes stay where a reader can hold them: no module over MAX_LINES lines and no
function over MAX_FUNCTION_LINES (ruff's size rules count statements and branches, not lines)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGES = ("checker_core", "galera_checker", "gr_checker")
ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500
MAX_FUNCTION_LINES = 60


def product_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for package in PACKAGES for p in (root / package).rglob("*.py"))


def long_modules(files: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in files
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    ]


def long_functions(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_product_module_is_over_the_limit() -> None:
    files = product_files()
    assert len(files) > 50, "the product's files were found"
    assert long_modules(files) == []


def test_no_product_function_is_over_the_limit() -> None:
    found = []
    for path in product_files():
        found += long_functions(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []


def test_a_long_function_is_found() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    found = long_functions(f"def short():\n    pass\n\n\ndef long():\n{body}\n", "m.py")
    assert found == [f"m.py:5 long: {MAX_FUNCTION_LINES + 1} lines"]
