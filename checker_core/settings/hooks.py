"""A cluster's hook keys checked together: the program is an executable file named by its
absolute path, the URL is http(s) with a host, the events are known ones."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from urllib.parse import urlsplit

from checker_core.core.events import EVENT_NAMES
from checker_core.core.settings import HookSettings, Secret
from checker_core.settings.problems import Problem
from checker_core.settings.values import Values

OPTIONAL_HOOK_KEYS = ("hook_command", "hook_url", "hook_events")


def hook_settings(values: Values, where: str, problems: list[Problem]) -> HookSettings | None:
    """The cluster's hooks, None when it has none; a bad value is said under its key."""
    command_text, url_text, events_text = (values.get(k) for k in OPTIONAL_HOOK_KEYS)
    before = len(problems)
    command = _command(command_text, f"{where}.hook_command", problems)
    url = _url(url_text, f"{where}.hook_url", problems)
    events = _events(events_text, f"{where}.hook_events", problems)
    if len(problems) > before:
        return None
    if not command and url is None:
        if events:
            problems.append(
                Problem(f"{where}.hook_events", "names events, but no hook_command or hook_url")
            )
        return None
    timeout, queue = values.get("hook_timeout_ms"), values.get("hook_queue")
    if not isinstance(timeout, int) or not isinstance(queue, int):
        return None  # said already
    return HookSettings(command, url, timeout, queue, events)


def _command(text: object, where: str, problems: list[Problem]) -> tuple[str, ...]:
    if not isinstance(text, str):
        return ()
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        problems.append(Problem(where, f"cannot be split into words: {exc}"))
        return ()
    program = Path(argv[0]) if argv else None
    if program is None or not program.is_absolute():
        problems.append(Problem(where, "must begin with the program's absolute path"))
    elif not program.is_file():
        problems.append(Problem(where, f"{program} is not a file"))
    elif not os.access(program, os.X_OK):
        problems.append(Problem(where, f"{program} is not executable by this user"))
    else:
        return argv
    return ()


def _url(text: object, where: str, problems: list[Problem]) -> Secret | None:
    if not isinstance(text, str):
        return None
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        problems.append(Problem(where, "is not a URL (the value is not shown: it is a secret)"))
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(
            Problem(where, "must be an http:// or https:// URL with a host (not shown)")
        )
        return None
    return Secret(text.strip())


def _events(text: object, where: str, problems: list[Problem]) -> frozenset[str]:
    if not isinstance(text, str):
        return frozenset()
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in EVENT_NAMES]
    if unknown or not names:
        what = f"unknown event(s) {', '.join(map(repr, unknown))}" if unknown else "names none"
        problems.append(Problem(where, f"{what}; known: {', '.join(EVENT_NAMES)}"))
        return frozenset()
    return frozenset(names)
