"""Every record in the product says what it holds in a docstring. Besides the reader, the
scheduler's pass gains: a dataclass without a docstring has one made at import from its
signature (inspect.signature over every field), paid by every run ProxySQL starts."""

from __future__ import annotations

import ast

from tests.unit.test_sizes import ROOT, product_files


def undocumented_records(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ClassDef)
            and any("dataclass" in ast.unparse(d) for d in node.decorator_list)
            and ast.get_docstring(node) is None
        ):
            found.append(f"{name}:{node.lineno} {node.name}")
    return found


def test_every_product_record_has_a_docstring() -> None:
    found = []
    for path in product_files():
        found += undocumented_records(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []


def test_a_record_without_a_docstring_is_found() -> None:
    source = (
        "from dataclasses import dataclass\n\n"
        "@dataclass(frozen=True)\nclass Said:\n    '''What it holds.'''\n    a: int\n\n"
        "@dataclass(frozen=True, slots=True)\nclass Silent:\n    a: int\n"
    )
    assert undocumented_records(source, "m.py") == ["m.py:9 Silent"]
