"""Rule ids agree between the code, its tests and docs/verdicts.md: every id named anywhere is
one of the table's, every checker rule (G, R) is named in the code that carries it and in a
test that holds it, and a range ("G1-G9") names what it spans."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE_ROW = re.compile(r"^\| ([SGR]\d+) \|", re.MULTILINE)
# an id, or a range of them ("G10-G12", with a hyphen or an en dash); ruff's codes (S608)
# have three digits
MENTION = re.compile(r"(?<![\w-])([SGR])(\d{1,2})(?:\s*[-\u2013]\s*([SGR])(\d{1,2}))?(?![\w])")


def table() -> list[str]:
    return TABLE_ROW.findall((ROOT / "docs" / "verdicts.md").read_text())


def mentioned(paths: list[Path], spans: bool = True) -> dict[str, set[Path]]:
    """Every id the files name, with the files naming it; `spans`: ranges count for every id
    they span, else for none."""
    found: dict[str, set[Path]] = {}
    for path in paths:
        for kind, first, other, last in MENTION.findall(path.read_text()):
            if last and not spans:
                continue
            end = int(last) if last and other == kind else int(first)
            for number in range(int(first), end + 1):
                found.setdefault(f"{kind}{number}", set()).add(path.relative_to(ROOT))
    return found


def code() -> list[Path]:
    return [
        p
        for d in ("checker_core", "galera_checker", "gr_checker")
        for p in (ROOT / d).rglob("*.py")
    ]


def in_tests() -> list[Path]:
    return [p for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name]


def docs() -> list[Path]:
    return [*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]


def checker_rules() -> list[str]:
    return [r for r in table() if r[0] in "GR"]


def test_the_table_lists_each_rule_once_in_order() -> None:
    ids = table()
    assert len(ids) == len(set(ids))
    for kind in "SGR":
        numbers = [int(i[1:]) for i in ids if i[0] == kind]
        assert numbers == list(range(1, len(numbers) + 1)), kind


def test_every_id_named_anywhere_is_in_the_table() -> None:
    known = set(table())
    for files in (code(), in_tests(), docs()):
        unknown = {i: sorted(map(str, p)) for i, p in mentioned(files).items() if i not in known}
        assert unknown == {}


def test_every_checker_rule_is_named_in_the_code_that_carries_it() -> None:
    named = mentioned(code())
    assert [r for r in checker_rules() if r not in named] == []


def test_every_checker_rule_is_named_by_a_test_of_its_own() -> None:
    named = mentioned(in_tests(), spans=False)
    assert [r for r in checker_rules() if r not in named] == []
