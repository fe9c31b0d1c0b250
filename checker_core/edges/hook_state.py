"""A cluster's hook files in the state directory: the condition its hooks were last told (so a
scheduler's next process and a restarted daemon go on from it), the slots a scheduler pass's
hook processes hold, and what those processes did, for the next pass to say."""

from __future__ import annotations

import os
from pathlib import Path

from checker_core.edges.memory import StateStore, atomic_write


def told_path(store: StateStore, cluster: str) -> Path:
    return store.file_path(cluster, "told")


def told(store: StateStore, cluster: str) -> str | None:
    """The condition last told (None: never, or the file is lost: a blind cluster is then told
    again, never not at all)."""
    try:
        return told_path(store, cluster).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def record_told(store: StateStore, cluster: str, condition: str) -> str | None:
    """Written atomically; what went wrong, in words."""
    path = told_path(store, cluster)
    try:
        store.ensure_dir()
        atomic_write(path, condition + "\n")
    except OSError as exc:
        return f"{path} not written ({exc.strerror or exc})"
    return None


def slot_path(store: StateStore, cluster: str, slot: int) -> Path:
    """A scheduler pass's hook process holds one of these, locked, while it runs."""
    return store.file_path(cluster, f"hook.{slot}")


def outcomes_path(store: StateStore, cluster: str) -> Path:
    """What a scheduler pass's hook processes did, one JSON line each, for the next pass to
    say (they write to no stream of their caller's: a caller reading its output would wait
    for them)."""
    return store.file_path(cluster, "hook-outcomes")


def take_outcomes(store: StateStore, cluster: str) -> list[str]:
    """The lines written since the last take, taken (a line a process appends meanwhile stays
    for the next take)."""
    path = outcomes_path(store, cluster)
    taken = path.with_name(f"{path.name}.{os.getpid()}.taken")
    try:
        os.replace(path, taken)
    except OSError:
        return []
    try:
        return taken.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    finally:
        taken.unlink(missing_ok=True)
