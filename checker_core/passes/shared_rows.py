"""One read of ProxySQL's rows for every cluster of a daemon, instead of one per cluster's pass.

ProxySQL's admin builds `runtime_mysql_servers` afresh, for every server it has, for every
SELECT that reads it: with 200 clusters of 3 nodes (3,000 rows), one read cost ProxySQL 31 ms
of CPU (docs/scaling.md). A daemon whose clusters each read their own rows every pass asks it
hundreds of times a second and overloads it: the reads time out and the passes fail, every
cluster's alike. Here a pass takes its cluster's rows out of one read of every cluster's
hostgroups, begun after anything its own runner wrote and not long before the pass began: a
read under way when the pass begins is waited for, else the pass reads, and the passes that
begin meanwhile take their rows from it. There is never more than one read at a time.

How old a read may be when a pass begins follows what reading costs (`max_age_s`): MIN_AGE_S,
or READ_SHARE times the last read's time when that is more (ProxySQL then spends at most about
1 / READ_SHARE of its time answering this daemon's reads), never more than half the interval
between a cluster's passes.

What a pass decides from stays as fresh as its own read would be, within that age: its own
writes are always seen, and every write is checked again under the write gate before its LOAD
(edges/proxysql_apply.py reads staging back), never trusted to these rows. The nodes' answers,
from which a pass decides who is healthy, are never shared.

One cluster never fails for another's sake: a row that cannot be read fails only the passes
of the clusters whose hostgroups hold it, and a read cut short by its reader's own deadline
leaves the others to read for themselves. A failure of ProxySQL itself (unreachable, a
statement refused) is what every waiting pass gets, as its own read would have got it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from checker_core.core.model import ClusterRows, ServerRow, sort_rows
from checker_core.edges.admin_errors import AdminError
from checker_core.edges.proxysql_rows import unpacked

if TYPE_CHECKING:
    from checker_core.core.settings import Settings
    from checker_core.edges.deadline import Deadline
    from checker_core.edges.proxysql import AdminClient

# how much older than its pass a shared read may be, at least (seconds), and the multiple of a
# read's own time it may be (see max_age_s)
MIN_AGE_S = 0.05
READ_SHARE = 10
# where a line whose hostgroup cannot be read is filed. ProxySQL's column is an integer and the
# read asks for the covered hostgroups only, so none is expected; should one come, every pass
# reads it and says what is wrong with it rather than lose a row it cannot place
_UNKNOWN = -1

Lines = tuple[str, ...]  # lines of rows_as_one_value, still packed


class _Read:
    """One read of the `covered` hostgroups: when it began, and its lines by hostgroup, or the
    AdminError every pass waiting for it gets."""

    __slots__ = ("by_hostgroup", "covered", "failed", "started", "text")

    def __init__(self, started: float, covered: frozenset[int]) -> None:
        self.started = started
        self.covered = covered
        self.text: str | None = None
        self.by_hostgroup: dict[int, Lines] = {}
        self.failed: AdminError | None = None


class SharedRows:
    """The rows of a daemon's clusters, read on a connection of their own (see the module)."""

    def __init__(
        self,
        settings: Settings,
        connect_admin: Callable[[Settings, Deadline | None], AdminClient],
        monotonic: Callable[[], float],
    ) -> None:
        self._settings = settings
        self._connect_admin = connect_admin
        self._monotonic = monotonic
        self._changed = threading.Condition()
        # under the condition: the hostgroups read, the last read done and the one under way
        self._covered: frozenset[int] = frozenset()
        self._last: _Read | None = None
        self._reading: _Read | None = None
        self._closed = False
        self._admin: AdminClient | None = None  # the reader's alone
        # each cluster's rows, made once per answer: the same object while nothing changed
        self._made: dict[tuple[int, ...], tuple[str, ClusterRows]] = {}
        self._read_s: float | None = None  # how long the last answered read took; unknown
        self.reads = 0  # how many reads ProxySQL answered or failed
        self.waiting = 0  # passes waiting for the read under way now
        self.cover(settings)

    def cover(self, settings: Settings) -> None:
        """Read the hostgroups of `settings`' clusters from now on (a reload's): a pass of a
        cluster outside them reads its rows itself."""
        covered = frozenset(h for c in settings.clusters for h in c.hostgroups.all)
        with self._changed:
            self._settings = settings  # the same proxy; its interval may be another
            if covered != self._covered:
                self._covered = covered
                self._last = None  # a read of the old set holds none of the new hostgroups

    def max_age_s(self) -> float:
        """How much older than a pass the read its rows come from may be (see the module)."""
        cap = self._settings.run.interval_ms / 2000
        if self._read_s is None:  # nothing read yet: no cost known
            return min(cap, MIN_AGE_S)
        return min(cap, max(MIN_AGE_S, READ_SHARE * self._read_s))

    def rows(
        self, hostgroups: Iterable[int], began: float, wrote: float, deadline: Deadline
    ) -> ClusterRows | None:
        """The rows of `hostgroups` for a pass that began at `began`, whose runner last wrote
        at `wrote` (monotonic): from a read begun no more than max_age_s before the pass, and
        after the write (strictly: one begun on the same tick may have been answered before
        it). None when this source does not read them (not covered, or closed): the caller
        reads them itself. Raises the read's AdminError, BadRow for one of these hostgroups'
        rows, or PassTimeout when the deadline comes first."""
        since = max(began - self.max_age_s(), math.nextafter(wrote, math.inf))
        wanted = tuple(sorted(set(hostgroups)))
        while True:
            done = self._read_since(wanted, since, deadline)
            if done is None:
                return None
            if not done.covered.issuperset(wanted):
                continue  # a reload changed what is read while this read was made
            if done.failed is not None:
                raise done.failed
            return self._rows_of(wanted, done)

    def _read_since(
        self, wanted: tuple[int, ...], since: float, deadline: Deadline
    ) -> _Read | None:
        """A read begun at `since` or later: the last one, the one under way, or one made
        here. None when `wanted` is not covered or the source is closed."""
        with self._changed:
            while True:
                if self._closed or not self._covered.issuperset(wanted):
                    return None
                last = self._last
                if last is not None and last.started >= since:
                    return last
                if self._reading is None:
                    mine = self._reading = _Read(self._monotonic(), self._covered)
                    break
                # wait for the read under way; if it began before `since`, read after it
                self.waiting += 1
                try:
                    answered = self._changed.wait(deadline.left())
                finally:
                    self.waiting -= 1
                if not answered:
                    raise deadline.cut_short("waiting for ProxySQL's rows")
        return self._read(mine, deadline)

    def _read(self, mine: _Read, deadline: Deadline) -> _Read:
        """The read this pass makes for every pass (the only one under way)."""
        try:
            admin = self._reader(deadline)
            admin.bound_by(deadline)
            try:
                text = admin.read_packed(mine.covered)
            finally:
                admin.bound_by(None)
            self._read_s = self._monotonic() - mine.started
        except AdminError as exc:
            self._drop()
            mine.failed = exc
        except BaseException:
            # this pass's own end (its deadline, or a fault here): the waiting passes read for
            # themselves; nothing is kept of this read
            self._drop()
            self._ended(None)
            raise
        else:
            last = self._last
            mine.text = text
            if last is not None and last.text == text:
                mine.by_hostgroup = last.by_hostgroup  # the steady state: filed already
            else:
                mine.by_hostgroup = _by_hostgroup(text)
        self._ended(mine)
        return mine

    def _ended(self, read: _Read | None) -> None:
        """The read under way is over (`read`: what it got; None when it got nothing)."""
        with self._changed:
            self._reading = None
            if read is not None:
                self.reads += 1
                if read.covered == self._covered and not self._closed:
                    self._last = read
            closed = self._closed
            self._changed.notify_all()
        if closed:
            self._drop()  # closed while this read was under way: its connection goes now

    def _rows_of(self, wanted: tuple[int, ...], read: _Read) -> ClusterRows:
        assert read.text is not None
        made = self._made.get(wanted)
        if made is not None and made[0] == read.text:  # most often the very same str
            return made[1]
        runtime: list[ServerRow] = []
        staging: list[ServerRow] = []
        for hostgroup in (*wanted, _UNKNOWN):
            for line in read.by_hostgroup.get(hostgroup, ()):
                source, values = unpacked(line)
                row = ServerRow.from_admin(values)
                (runtime if source == "r" else staging).append(row)
        rows = ClusterRows(runtime=sort_rows(runtime), staging=sort_rows(staging))
        self._made[wanted] = (read.text, rows)
        return rows

    def _reader(self, deadline: Deadline) -> AdminClient:
        if self._admin is None:
            self._admin = self._connect_admin(self._settings, deadline)
        return self._admin

    def _drop(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            admin.close()

    def close(self) -> None:
        """No more reads: a pass asking now reads its rows itself. The connection is closed
        here, or by the read under way when it ends."""
        with self._changed:
            self._closed = True
            self._last = None
            reading = self._reading is not None
            self._changed.notify_all()
        if not reading:
            self._drop()


def _by_hostgroup(text: str) -> dict[int, Lines]:
    """A read's lines by the hostgroup they name, each line left packed (a pass unpacks only
    its own cluster's); one whose hostgroup cannot be read is filed under _UNKNOWN."""
    found: dict[int, list[str]] = {}
    for line in text.split("\n") if text else ():
        first = line.partition("|")[2].partition("|")[0]
        try:
            hostgroup = int(bytes.fromhex(first[1:]).decode()) if first[:1] == "x" else _UNKNOWN
        except ValueError:
            hostgroup = _UNKNOWN
        found.setdefault(hostgroup, []).append(line)
    return {h: tuple(lines) for h, lines in found.items()}
