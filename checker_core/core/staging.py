"""mysql_servers as a staging area that others write too: which staged rows are not live, what
puts back a pass's own unfinished writes, and which staged rows a LOAD must not carry. Pure.

A LOAD MYSQL SERVERS TO RUNTIME carries the whole table, so a pass that loads must first know
every staged row that differs from what is live; runtime is ProxySQL's state and staging is
intent, so the comparison reads a runtime row as the staged row it stands for
(`live_as_staged`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from checker_core.core.model import ClusterRows, ServerRow, ServerStatus, sort_rows

Key = tuple[int, str, int]


def live_as_staged(live: ServerRow | None, staged: ServerRow | None) -> ServerRow | None:
    """The staged row that says `live` is what it is (None: no row). A SHUNNED row is the
    ONLINE row that was loaded (ProxySQL's monitor's state, never written); an OFFLINE_HARD
    row with no row staged is a server a LOAD removed that ProxySQL keeps while clients hold
    connections to it, so no staged row stands for it, and one staged OFFLINE_HARD is the
    operator's row that was loaded."""
    if live is None:
        return None
    if live.status is not ServerStatus.OFFLINE_HARD:
        return live.as_loaded()
    if staged is not None and staged.status is ServerStatus.OFFLINE_HARD:
        return live
    return None


def _by_key(rows: Iterable[ServerRow]) -> dict[Key, ServerRow]:
    return {r.key: r for r in rows}


@dataclass(frozen=True, slots=True)
class SetAside:
    """Staged rows of hostgroups a pass does not manage that differ from what is live (an
    operator's edit in progress, another tool's, a dead pass's of another cluster): the LOAD
    must carry none of them, and the pass must not undo them. `live` is what those
    hostgroups' staging holds while the LOAD goes out, `staged` what is written back after."""

    hostgroups: tuple[int, ...]
    staged: tuple[ServerRow, ...]
    live: tuple[ServerRow, ...]
    rows_per_hostgroup: tuple[tuple[int, int], ...]  # (hostgroup, rows that differ)

    def __bool__(self) -> bool:
        return bool(self.hostgroups)

    def as_live(self) -> tuple[GuardedWrite, ...]:
        """What stages these hostgroups as live, row by row, each only while its row still
        holds the staged row read (an edit made since stays, and keeps the LOAD from going
        out: the read-back finds it)."""
        return guarded_writes(self.staged, self.live)

    def describe(self, kept_from: str = "loaded") -> str:
        """In words; `kept_from`: what the edit was kept out of ("loaded", "saved to disk")."""
        parts = [
            f"hostgroup {hg} ({count} row{'s' if count != 1 else ''})"
            for hg, count in self.rows_per_hostgroup
        ]
        return f"an operator's staged edit of {', '.join(parts)} kept staged, not {kept_from}"


NOTHING_ASIDE = SetAside((), (), (), ())


def set_aside(rows: ClusterRows, own: Iterable[int]) -> SetAside:
    """What a LOAD must leave staged and not load: every hostgroup outside `own` (the
    hostgroups this pass wrote) whose staged rows differ from what is live. `rows`: the whole
    of mysql_servers and runtime_mysql_servers, read at once."""
    mine = set(own)
    live = _by_key(r for r in rows.runtime if r.hostgroup_id not in mine)
    staged = _by_key(r for r in rows.staging if r.hostgroup_id not in mine)
    differ: dict[int, int] = {}
    for key in live.keys() | staged.keys():
        if live_as_staged(live.get(key), staged.get(key)) != staged.get(key):
            differ[key[0]] = differ.get(key[0], 0) + 1
    if not differ:
        return NOTHING_ASIDE
    hostgroups = tuple(sorted(differ))
    keys = {k for k in live.keys() | staged.keys() if k[0] in differ}
    as_live = (live_as_staged(live.get(k), staged.get(k)) for k in keys)
    return SetAside(
        hostgroups,
        sort_rows(staged[k] for k in keys if k in staged),
        sort_rows(r for r in as_live if r is not None),
        tuple(sorted(differ.items())),
    )


@dataclass(frozen=True, slots=True)
class GuardedWrite:
    """One write to a row someone else owns, made only while the row still holds `expect`
    (None: no row with its key): it then holds `write` (None: deleted). A write that finds
    anything else finds someone's newer edit, and leaves it."""

    expect: ServerRow | None
    write: ServerRow | None

    @property
    def key(self) -> Key:
        row = self.write if self.write is not None else self.expect
        assert row is not None, "a guarded write names a row"
        return row.key

    def undo(self) -> GuardedWrite:
        """What puts the row back, only while it holds what this write put there."""
        return GuardedWrite(self.write, self.expect)


def _phase(write: GuardedWrite) -> int:
    if write.write is None:
        return 0
    return 1 if write.write.status is not ServerStatus.ONLINE else 2


def _in_order(writes: Iterable[GuardedWrite]) -> tuple[GuardedWrite, ...]:
    """Removals and demotions first, ONLINE rows last: anyone's LOAD between two of them finds
    no more ONLINE rows staged than before or after them."""
    return tuple(sorted(writes, key=lambda w: (_phase(w), w.key)))


def guarded_writes(now: Sequence[ServerRow], then: Sequence[ServerRow]) -> tuple[GuardedWrite, ...]:
    """The writes that turn the rows `now` into `then`, each only while its row still holds
    what `now` says."""
    was, want = _by_key(now), _by_key(then)
    return _in_order(
        GuardedWrite(was.get(key), want.get(key))
        for key in was.keys() | want.keys()
        if was.get(key) != want.get(key)
    )


def written_back(done: Iterable[GuardedWrite]) -> tuple[GuardedWrite, ...]:
    """What stages again the rows a set-aside staged as live: only the writes that went in
    (`done`), each undone only while its row still holds the live row the pass put there."""
    return _in_order(w.undo() for w in done)


def changed_while_aside(missed: Iterable[GuardedWrite]) -> str | None:
    """The warning for set-aside rows someone wrote in between (None: none was)."""
    hostgroups = sorted({w.key[0] for w in missed})
    if not hostgroups:
        return None
    groups = ", ".join(str(hg) for hg in hostgroups)
    plural = "s" if len(hostgroups) > 1 else ""
    return (
        f"an operator's staged edit of hostgroup{plural} {groups} changed while it was set "
        "aside: kept as they wrote it"
    )


def undone(
    before: Mapping[Key, ServerRow | None],
    wrote: Mapping[Key, ServerRow | None],
    current: Sequence[ServerRow],
) -> tuple[ServerRow, ...]:
    """Staging as it was before a pass's writes: every row the pass wrote (`wrote`: its value,
    None for a delete) that still holds what it wrote is put back as it was (`before`); a row
    someone else wrote since, and every row the pass did not write, stays as it is now."""
    now = _by_key(current)
    for key, written in wrote.items():
        if now.get(key) == written:
            was = before.get(key)
            if was is None:
                now.pop(key, None)
            else:
                now[key] = was
    return sort_rows(now.values())


def left_half_written(
    before: Mapping[Key, ServerRow | None], wrote: Mapping[Key, ServerRow | None]
) -> tuple[str, ...]:
    """The rows a pass wrote and could not put back, in words."""
    said = []
    for key in sorted(wrote):
        row, was = wrote[key], before.get(key)
        if row == was:
            continue
        if row is None:
            said.append(f"{key[1]}:{key[2]} removed from hostgroup {key[0]}")
        else:
            said.append(row.describe())
    return tuple(said)
