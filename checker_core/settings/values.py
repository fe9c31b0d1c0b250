"""One table's values checked against the key table (a key's type, bounds and choices are said
there once), and read back typed as their keys say."""

from __future__ import annotations

import re
from collections.abc import Callable

from checker_core.core.keys import KEYS_BY_SECTION
from checker_core.core.schema import Checker, Key
from checker_core.settings.problems import Problem, Text
from checker_core.settings.sources import suggest

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class Values(dict[str, object]):
    """A table's values, each checked against its key (None: bad or missing, and said)."""

    def number(self, name: str) -> int:
        value = self[name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is not a checked whole number: {value!r}")
        return value

    def flag(self, name: str) -> bool:
        value = self[name]
        if not isinstance(value, bool):
            raise TypeError(f"{name} is not a checked true or false: {value!r}")
        return value

    def text(self, name: str) -> str:
        value = self[name]
        if not isinstance(value, str):
            raise TypeError(f"{name} is not a checked string: {value!r}")
        return str(value)

    def optional_number(self, name: str) -> int | None:
        return None if self[name] is None else self.number(name)

    def complete(self, *optional: str) -> bool:
        """Every value but the `optional` ones is there (none was bad or missing)."""
        return all(v is not None for k, v in self.items() if k not in optional)


def shown(key: Key, value: object) -> str:
    """A bad value as the message shows it: a secret's is never shown, not even a wrong one."""
    return "a value that is not shown (it is a secret)" if key.secret else repr(value)


def _as_bool(key: Key, value: object, where: str, problems: list[Problem]) -> object:
    if isinstance(value, bool):
        return value
    if isinstance(value, Text) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    problems.append(Problem(where, f"expected true or false, got {shown(key, value)}"))
    return None


def _as_int(key: Key, value: object, where: str, problems: list[Problem]) -> object:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, Text) and re.fullmatch(r"\s*-?\d+\s*", value):
        number = int(value)
    if number is None:
        got = shown(key, value)
        if isinstance(value, float) and value.is_integer():
            got += f" (write it as {int(value)}, without the decimal point)"
        problems.append(Problem(where, f"expected a whole number, got {got}"))
        return None
    if key.minimum is not None and number < key.minimum:
        problems.append(Problem(where, f"must be >= {key.minimum}, got {number}"))
        return None
    if key.maximum is not None and number > key.maximum:
        problems.append(Problem(where, f"must be <= {key.maximum}, got {number}"))
        return None
    return number


def _as_str(key: Key, value: object, where: str, problems: list[Problem]) -> object:
    if not isinstance(value, str):
        problems.append(Problem(where, f"expected a string, got {shown(key, value)}"))
        return None
    text = str(value)
    if key.secret:
        # a line break or NUL cannot be part of a password any client sends
        if any(c in text for c in "\n\r\x00"):
            problems.append(Problem(where, "holds a line break or NUL character (not shown)"))
            return None
        return text
    if not text.strip():
        problems.append(Problem(where, "is empty"))
        return None
    if not text.isprintable() and (key.section, key.name) != ("cluster", "name"):
        # (a cluster name has a rule of its own, which says what may be in it)
        problems.append(Problem(where, f"{text!r} holds a control character (a line break?)"))
        return None
    if key.choices and text not in key.choices:
        problems.append(Problem(where, f"must be one of {', '.join(key.choices)}, got {text!r}"))
        return None
    return text


_CHECKS: dict[type, Callable[[Key, object, str, list[Problem]], object]] = {
    bool: _as_bool,
    int: _as_int,
    str: _as_str,
}


def checked(key: Key, value: object, where: str, problems: list[Problem]) -> object:
    """One value checked against its key; None when it is bad (the problem is recorded)."""
    return _CHECKS[key.kind](key, value, where, problems)


def section_values(
    section: str,
    table: object,
    where: str,
    checker: Checker,
    problems: list[Problem],
) -> Values:
    """Checked values of one table, defaults filled; a bad or missing key maps to None."""
    keys = KEYS_BY_SECTION[section]
    if not isinstance(table, dict):
        problems.append(Problem(where, f"expected a table, got {table!r}"))
        table = {}
    values = Values()
    for name in table:
        key = keys.get(name)
        if key is None:
            problems.append(Problem(f"{where}.{name}", f"unknown key{suggest(name, list(keys))}"))
        elif checker not in key.checkers:
            only = " and ".join(c.command for c in key.checkers)
            problems.append(Problem(f"{where}.{name}", f"only {only} uses this key"))
    for name, key in keys.items():
        if checker not in key.checkers:
            values[name] = key.default
        elif name in table:
            values[name] = checked(key, table[name], f"{where}.{name}", problems)
        elif key.required:
            problems.append(Problem(f"{where}.{name}", "missing (required)"))
            values[name] = None
        else:
            values[name] = key.default
    return values
