"""A cluster's hook keys (docs/hooks.md), declared as every key is (core.keys takes them)."""

from __future__ import annotations

from checker_core.core.events import EVENT_NAMES
from checker_core.core.schema import Key

HOOK_KEYS: tuple[Key, ...] = (
    Key(
        "cluster",
        "hook_command",
        str,
        None,
        "A program run on each of the cluster's events, the event as JSON on its stdin: an "
        "absolute path, then arguments (split as a shell splits words; no shell runs it). Its "
        "environment holds PATH, LANG and HOME alone; never a secret. See docs/hooks.md.",
        optional=True,
    ),
    Key(
        "cluster",
        "hook_url",
        str,
        None,
        "An http:// or https:// URL each event is POSTed to as JSON (it may hold a token: "
        "never printed, refused on --set).",
        secret=True,
        optional=True,
    ),
    Key(
        "cluster",
        "hook_timeout_ms",
        int,
        10000,
        "A hook still running after this long is killed (its whole process group) and said "
        "as failed; a URL gets this long to answer.",
        minimum=100,
        maximum=600000,
    ),
    Key(
        "cluster",
        "hook_queue",
        int,
        100,
        "Events waiting for the hooks at most (the daemon); a scheduler pass's hook processes "
        "still running at most. Past it an event is dropped, counted and said.",
        minimum=1,
        maximum=100000,
    ),
    Key(
        "cluster",
        "hook_events",
        str,
        None,
        "The events the hooks are told, comma-separated (unset: every one): "
        + ", ".join(EVENT_NAMES)
        + ".",
        optional=True,
    ),
)
