"""What is wrong with a configuration: each problem names its key, and all are said at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the configuration, named by its key."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


class ConfigError(Exception):
    """The configuration is unusable; `problems` lists every reason."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class _Text(str):
    """A value typed by a person in the environment or on the command line: parse it."""


class Text(str):
    """A value typed by a person in the environment or on the command line: parse it."""
