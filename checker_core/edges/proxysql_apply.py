"""A plan made live on one admin connection (AdminClient.apply): staged, read back, one LOAD,
then SAVE; the staged rows of others set aside around the LOAD and written back after it; what
a failed apply wrote put back, on this connection or a new one.

ProxySQL's admin interface has no transactions, so everything here is about what anyone's LOAD
would carry between two of these statements (rule S2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from checker_core.core.model import BadRow, ClusterRows, Plan, ServerRow, sort_rows
from checker_core.core.staging import (
    NOTHING_ASIDE,
    GuardedWrite,
    SetAside,
    changed_while_aside,
    left_half_written,
    set_aside,
    undone,
    written_back,
)
from checker_core.core.statements import (
    LOAD_SERVERS,
    SAVE_SERVERS,
    ApplyResult,
    StagingRefused,
    staging_statements,
)
from checker_core.edges.admin_errors import AdminQueryFailed, ApplyFailed


class Admin(Protocol):
    """What an apply asks of its admin connection (AdminClient)."""

    where: str

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]: ...

    def write_guarded(self, write: GuardedWrite) -> bool: ...

    def read_staging(
        self, hostgroups: Sequence[int], *, any_host: bool = False
    ) -> tuple[ServerRow, ...]: ...

    def read_whole(self) -> ClusterRows: ...

    def close(self) -> None: ...


class PlanApply:
    """One apply's statements on `admin`."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def run(
        self,
        plan: Plan,
        persist: bool,
        *,
        staged_already: bool = False,
        save_owed: bool = False,
        on_load: Callable[[], None] | None = None,
        warn: Callable[[str], None] | None = None,
        reconnect: Callable[[], Admin] | None = None,
    ) -> ApplyResult:
        """Admin.apply's work (see there); `staged_already`: the plan's rows are staged
        as the pass read them, and nothing is to be loaded."""
        said = warn or _say_nothing
        if staged_already:
            return self._owed_save(plan, persist and save_owed, 0, said, reconnect)
        writes = Writes()
        try:
            staged, aside, done = self._stage_plan(plan, writes)
        except BaseException as exc:
            self._put_back(plan, writes, exc, said, reconnect)
            if isinstance(exc, (AdminQueryFailed, BadRow)):
                raise ApplyFailed(f"staging failed, nothing loaded: {exc}") from None
            raise
        if not plan.needs_load:
            return self._owed_save(plan, persist and save_owed, staged, said, reconnect)
        try:
            self.admin.execute(LOAD_SERVERS.sql)
        except AdminQueryFailed as exc:
            # refused: nothing went live. Any other failure may have come after ProxySQL ran
            # it; staging then stays as the pass wrote it, and live too, likely
            self._put_back(plan, writes, exc, said, reconnect)
            raise ApplyFailed(f"LOAD MYSQL SERVERS TO RUNTIME failed: {exc}") from None
        except BaseException as exc:
            # the answer lost (it may have run): the operator's rows set aside as live are his
            # again in staging either way, on a new connection; nothing of them went live
            self._write_back(aside, done, exc, said, reconnect)
            raise
        if on_load is not None:
            on_load()
        if aside:
            said(aside.describe())
        try:
            # before the write-back: disk is what is live, never an edit nobody loaded
            result = self._save(persist, staged=staged, loaded=True)
        except BaseException as exc:
            self._write_back(aside, done, exc, said, reconnect)
            raise
        self._write_back(aside, done, None, said, reconnect)
        return result

    def _stage_plan(self, plan: Plan, writes: Writes) -> tuple[int, SetAside, _AsLive]:
        """The plan's rows staged and read back; before a LOAD, the rows of other hostgroups
        that differ from what is live staged as live (set aside). Raises ApplyFailed when the
        staging is not what this pass wrote."""
        hg = plan.hostgroups
        checked = [*hg.managed, *hg.templates]
        staged = stage_rows(self.admin, hg.managed, plan.desired, hg.writer, writes=writes)
        if plan.adopted:
            staged += stage_rows(self.admin, hg.templates, plan.adopted, None, writes=writes)
        wanted = sort_rows((*plan.desired, *plan.templates))
        if not plan.needs_load:
            self._verify(self.admin.read_staging(checked), wanted)
            return staged, NOTHING_ASIDE, _AsLive()
        whole = self.admin.read_whole()
        self._verify(whole.staged(checked), wanted)
        # templates nobody loaded yet are the roster this pass used, and templates this plan
        # adopts are its own: its LOAD carries them
        own = checked if plan.adopted or not whole.live(hg.templates) else list(hg.managed)
        ours = sort_rows(r for r in wanted if r.hostgroup_id in own)
        aside, done = self._set_aside(whole, own, ours, writes)
        return staged + len(done.tried), aside, done

    def _set_aside(
        self, whole: ClusterRows, own: Sequence[int], ours: Sequence[ServerRow], writes: Writes
    ) -> tuple[SetAside, _AsLive]:
        """The staged rows outside `own` that differ from what is live (read in `whole`)
        staged as live, each only while it is still as read, and read back: `own` staged
        still as `ours`, every other row as live, else ApplyFailed (and neither LOAD nor SAVE
        goes out)."""
        aside = set_aside(whole, own)
        if not aside:
            return aside, _AsLive()
        writes.aside |= set(aside.hostgroups)
        # another cluster's or an operator's rows, taken as read: a row this pass could not
        # judge (a malformed hostname) is no reason to fail this cluster's LOAD
        writes.note(aside.hostgroups, whole.staged(aside.hostgroups), aside.live)
        tried = aside.as_live()
        done = _AsLive(tried, tuple(w for w in tried if self.admin.write_guarded(w)))
        again = self.admin.read_whole()
        self._verify(again.staged(own), ours, clean=not set_aside(again, own))
        return aside, done

    def _owed_save(
        self,
        plan: Plan,
        wanted: bool,
        staged: int,
        said: Callable[[str], None],
        reconnect: Callable[[], Admin] | None,
    ) -> ApplyResult:
        """The SAVE an earlier pass owes, with nothing to load. A SAVE writes the whole of
        mysql_servers to disk, so staged rows outside the managed hostgroups that differ from
        what is live (an operator's edit in progress) are set aside around it as around a
        LOAD: disk then holds what is live for every row this pass did not write, and a
        ProxySQL restart makes live nothing nobody loaded. When they cannot be set aside,
        nothing is saved and the SAVE stays owed."""
        if not wanted:
            return ApplyResult(staged=staged, loaded=False, saved=False)
        writes = Writes()
        own = list(plan.hostgroups.managed)
        try:
            whole = self.admin.read_whole()
            aside, done = self._set_aside(whole, own, whole.staged(own), writes)
        except BaseException as exc:
            self._put_back(plan, writes, exc, said, reconnect, held="a SAVE")
            if isinstance(exc, _IN_STEP):
                return ApplyResult(
                    staged=staged,
                    loaded=False,
                    saved=False,
                    save_error=(
                        "SAVE MYSQL SERVERS TO DISK still owed, not run: the staged rows of "
                        f"hostgroups this pass does not manage could not be set aside ({exc})"
                    ),
                )
            raise
        staged += len(done.tried)
        if aside:
            said(aside.describe(kept_from="saved to disk"))
        try:
            # before the write-back: disk is what is live, never an edit nobody loaded
            result = self._save(True, staged=staged, loaded=False)
        except BaseException as exc:
            self._write_back(aside, done, exc, said, reconnect, after="SAVE")
            raise
        # a SAVE that went out wrote what is live there, not the edit
        disk = "disk as runtime" if result.saved else "disk unchanged"
        unchanged = f"runtime unchanged, {disk}"
        self._write_back(aside, done, None, said, reconnect, after="SAVE", unchanged=unchanged)
        return result

    def _verify(
        self, readback: Sequence[ServerRow], wanted: Sequence[ServerRow], *, clean: bool = True
    ) -> None:
        if not clean or sort_rows(readback) != tuple(wanted):
            raise ApplyFailed(
                f"{self.admin.where}: staging rows changed under us (another writer?), "
                "nothing loaded"
            )

    def _put_back(
        self,
        plan: Plan,
        writes: Writes,
        failure: BaseException,
        said: Callable[[str], None],
        reconnect: Callable[[], Admin] | None,
        *,
        held: str = "a LOAD",
    ) -> None:
        """The rows this call wrote put back as it read them (never what is live: staging
        holds the operator's intent), so nobody's LOAD makes a plan live that this pass did
        not. A row someone else wrote since stays theirs. `held`: the statement that did not
        go out."""
        if not writes.wrote:
            return
        hostgroups = sorted(writes.hostgroups)

        def put_back(admin: Admin) -> None:
            current = admin.read_staging(hostgroups, any_host=True)
            wanted = undone(writes.before, writes.wrote, current)
            for statement in staging_statements(
                hostgroups, current, wanted, writer=plan.hostgroups.writer
            ):
                admin.execute(statement.sql, statement.params)

        problem = on_a_working_connection(self.admin, put_back, failure, reconnect)
        if problem is None:
            return
        mine = {k: r for k, r in writes.wrote.items() if k[0] not in writes.aside}
        theirs = {k: r for k, r in writes.wrote.items() if k[0] in writes.aside}
        if mine:
            rows = "; ".join(left_half_written(writes.before, mine))
            said(
                f"staged rows left half-written: {rows} ({problem}); "
                "the next acting pass puts them back"
            )
        if theirs:
            groups = ", ".join(str(hg) for hg in sorted({k[0] for k in theirs}))
            unchanged = "runtime and disk unchanged" if "SAVE" in held else "runtime unchanged"
            said(
                f"an operator's staged edit of hostgroup {groups} was set aside as live for "
                f"{held} that did not go out, and could not be written back ({problem}): it "
                f"is gone from mysql_servers; {unchanged}"
            )

    def _write_back(
        self,
        aside: SetAside,
        done: _AsLive,
        failure: BaseException | None,
        said: Callable[[str], None],
        reconnect: Callable[[], Admin] | None,
        *,
        after: str = "LOAD",
        unchanged: str = "runtime unchanged",
    ) -> None:
        """The staged edit set aside for the LOAD (or SAVE), staged again as it was read (no
        LOAD): each row only while it still holds the live row this pass put there. A row
        someone wrote in between (before it was staged as live, or since) stays as they wrote
        it, and that is said once."""
        if not aside:
            return
        missed = [w for w in done.tried if w not in done.went_in]
        answered: set[GuardedWrite] = set()

        def write_back(admin: Admin) -> None:
            # a second connection's try skips the rows the first one's answers covered
            for write in written_back(done.went_in):
                if write not in answered:
                    if not admin.write_guarded(write):
                        missed.append(write)
                    answered.add(write)

        problem = on_a_working_connection(self.admin, write_back, failure, reconnect)
        warning = changed_while_aside(missed)
        if warning is not None:
            said(warning)
        if problem is not None:
            groups = ", ".join(str(hg) for hg in aside.hostgroups)
            said(
                f"an operator's staged edit of hostgroup {groups} could not be staged again "
                f"after the {after} ({problem}): it is gone from mysql_servers; {unchanged}"
            )

    def _save(self, wanted: bool, *, staged: int, loaded: bool) -> ApplyResult:
        if not wanted:
            return ApplyResult(staged=staged, loaded=loaded, saved=False)
        try:
            self.admin.execute(SAVE_SERVERS.sql)
        except AdminQueryFailed as exc:
            # not a failed apply: the rows are live, and saying otherwise would mislead
            done = "loaded" if loaded else "live"
            failure = f"{done}, but SAVE MYSQL SERVERS TO DISK failed: {exc}"
            return ApplyResult(staged=staged, loaded=loaded, saved=False, save_error=failure)
        return ApplyResult(staged=staged, loaded=loaded, saved=True)


def on_a_working_connection(
    admin: Admin,
    work: Callable[[Admin], None],
    failure: BaseException | None,
    reconnect: Callable[[], Admin] | None,
) -> str | None:
    """`work` done on this connection when it is in step (no failure, or a statement
    ProxySQL refused), else, or when that fails, on one new connection, each bounded by
    the admin's own timeouts. None when done, else why not."""
    problem = f"{type(failure).__name__}: {failure}" if failure is not None else ""
    if failure is None or isinstance(failure, _IN_STEP):
        try:
            work(admin)
            return None
        except Exception as exc:  # whatever it was, the new connection is the next try
            problem = f"{type(exc).__name__}: {exc}"
    if reconnect is None:
        return problem
    try:
        fresh = reconnect()
    except Exception as exc:
        return f"{problem}; a new admin connection failed too: {exc}"
    try:
        work(fresh)
    except Exception as exc:
        return f"{problem}; on a new admin connection: {type(exc).__name__}: {exc}"
    finally:
        fresh.close()
    return None


def stage_rows(
    admin: Admin,
    hostgroups: Sequence[int],
    desired: Sequence[ServerRow],
    writer: int | None,
    *,
    writes: Writes,
    current: Sequence[ServerRow] | None = None,
) -> int:
    """Make mysql_servers hold exactly `desired` in `hostgroups`; the statements issued.
    `current`: the staged rows of `hostgroups` as just read (else read here)."""
    if current is None:
        current = admin.read_staging(hostgroups)
    statements = staging_statements(hostgroups, current, desired, writer=writer)
    # noted before the first statement goes out: a pass cut short anywhere after it puts back
    # what it wrote, and only that
    writes.note(hostgroups, current, desired)
    for statement in statements:
        admin.execute(statement.sql, statement.params)
    return len(statements)


@dataclass(frozen=True, slots=True)
class _AsLive:
    """The writes that staged set-aside rows as live: all `tried`, and those that `went_in`
    (a row's write that found someone's newer edit did not)."""

    tried: tuple[GuardedWrite, ...] = ()
    went_in: tuple[GuardedWrite, ...] = ()


class Writes:
    """What one apply() wrote to staging, row by row: the row it found first (None: none) and
    the row it wrote last (None: deleted). One call's own: never shared between passes."""

    def __init__(self) -> None:
        self.before: dict[tuple[int, str, int], ServerRow | None] = {}
        self.wrote: dict[tuple[int, str, int], ServerRow | None] = {}
        self.hostgroups: set[int] = set()
        # the hostgroups set aside for a LOAD or SAVE: the rows written there are others'
        self.aside: set[int] = set()

    def note(
        self, hostgroups: Sequence[int], current: Sequence[ServerRow], desired: Sequence[ServerRow]
    ) -> None:
        inside = set(hostgroups)
        have = {r.key: r for r in current if r.hostgroup_id in inside}
        want = {r.key: r for r in desired}
        for key in have.keys() | want.keys():
            if have.get(key) != want.get(key):
                self.before.setdefault(key, have.get(key))
                self.wrote[key] = want.get(key)
        self.hostgroups |= inside


# a failure after which the connection is still in step: ProxySQL answered, with a refusal, or
# the pass itself found the rows wrong
_IN_STEP = (AdminQueryFailed, BadRow, ApplyFailed, StagingRefused)


def _say_nothing(_text: str) -> None:
    return None
