"""`gr-checker switchover`: the side effects of a planned move of the Group Replication primary.

1. take the cluster's pass lock (waiting at most one pass and one interval for a running
   daemon's or scheduler's pass to end), judge the group with a pass that changes nothing, and
   refuse (exit 2, nothing changed) unless the target may take over (gr_checker/switchover.py);
2. release the lock, and run `group_replication_set_as_primary(<uuid>)` on the target as the
   [node_admin] account, on a thread of its own: the call returns once the group has switched;
3. meanwhile run passes (each under the lock, as any pass) that follow the group: the old
   primary leaves the writer hostgroup the pass it is read-only, the new one enters it the
   pass it is writable (empty in between with `brownout = hold`);
4. end when the call has returned and the writer hostgroup routes to the target alone, by the
   pass's own rule (the old primary's OFFLINE_HARD row, kept while clients still hold
   connections to it, routes nothing and does not count): exit 0; when the call failed (exit 1,
   after a pass has shown what the group has now), or at --timeout (exit 1).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.model import NodeAddress
from checker_core.core.roster import LiveLayout
from checker_core.edges.lock import cluster_lock
from checker_core.exitcodes import Exit
from checker_core.passes.announce import CommandHooks
from checker_core.passes.repeat import passes_until
from checker_core.passes.result import Mode, Outcome, PassResult
from checker_core.passes.runner import PassRunner
from checker_core.report import summary
from gr_checker.switchover import (
    ELECTION_FACTS,
    Candidate,
    Move,
    Refusal,
    Why,
    check,
    describe_refusal,
    elect,
    statement,
    steps,
    successor,
    uuid_of,
)

if TYPE_CHECKING:
    from checker_core.core.settings import ClusterSettings, Endpoint, Settings
    from checker_core.passes.plugin import CheckerKind

LOCK_POLL_S = 0.05
DEFAULT_TIMEOUT_S = 60.0


class Call(threading.Thread):
    """group_replication_set_as_primary on a thread: it blocks until the group has switched."""

    def __init__(
        self,
        account: Endpoint,
        node: NodeAddress,
        sql: str,
        params: tuple[object, ...],
        wait_s: float,
    ) -> None:
        super().__init__(name="set-as-primary", daemon=True)
        self.account, self.node, self.sql, self.params, self.wait_s = (
            account,
            node,
            sql,
            params,
            wait_s,
        )
        self.answer: str | None = None
        self.error: str | None = None
        self.finished = threading.Event()

    def run(self) -> None:
        import pymysql

        from checker_core.edges import node_admin

        started = time.monotonic()
        try:
            with (
                node_admin.session(self.account, self.node, wait_s=self.wait_s) as conn,
                conn.cursor() as cur,
            ):
                cur.execute(self.sql, self.params)
                row = cur.fetchone()
                self.answer = "" if row is None else str(row[0])
        except (pymysql.MySQLError, OSError, node_admin.NoNodeAdmin) as exc:
            spent = time.monotonic() - started
            self.error = _failure(exc, spent, self.wait_s)
        finally:
            self.finished.set()


def _failure(exc: Exception, spent: float, wait_s: float) -> str:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    text = str(exc.args[1]) if code is not None and len(exc.args) > 1 else str(exc)
    if code in (2013, 2006) and spent >= wait_s * 0.9:
        return (
            f"no answer within {wait_s:g} s; the group may still carry the switch out (it waits "
            "for the old primary's running transactions: --running-transactions-timeout bounds "
            "that wait) and the checker follows whichever member it ends with"
        )
    return f"error {code}: {text}" if code is not None else text


@contextmanager
def _lock_within(runner: PassRunner, cluster: str, wait_s: float) -> Iterator[bool]:
    """The pass lock, waiting up to `wait_s` for a running pass to let go of it."""
    runner.store.ensure_dir()
    limit = time.monotonic() + wait_s
    while True:
        with cluster_lock(runner.store.lock_path(cluster)) as held:
            if held or time.monotonic() >= limit:
                yield held
                return
        time.sleep(LOCK_POLL_S)


def candidates(
    account: Endpoint, nodes: list[NodeAddress], uuids: dict[NodeAddress, str]
) -> list[Candidate] | str:
    """Each candidate's member weight and version, as node_admin (the election's tie-breakers)."""
    import pymysql

    from checker_core.edges import node_admin

    found = []
    for node in nodes:
        try:
            with node_admin.session(account, node) as conn, conn.cursor() as cur:
                cur.execute(ELECTION_FACTS)
                row = cur.fetchone()
        except (pymysql.MySQLError, OSError) as exc:
            return f"{node}: cannot read its member weight as node_admin: {exc}"
        if row is None:
            return f"{node}: not in its own replication_group_members view"
        found.append(Candidate(node, uuids[node], int(row[0]), str(row[1])))
    return found


def switchover(
    settings: Settings,
    kind: CheckerKind,
    cluster: ClusterSettings,
    *,
    target: NodeAddress | None,
    source: NodeAddress | None,
    dry_run: bool,
    running_transactions_timeout_s: int | None,
    timeout_s: float,
    say: Callable[[str], None],
) -> Exit:
    """Check, then ask the group to elect the target and follow it (see the module's doc)."""
    account = settings.node_admin
    if account is None:
        refusal = Refusal(
            Why.NO_NODE_ADMIN,
            "node_admin: no [node_admin] account is configured; group_replication_set_as_primary "
            "runs as it (it needs GROUP_REPLICATION_ADMIN)",
        )
        say(describe_refusal(cluster.name, target, refusal))
        return Exit.BAD_INPUT
    runner = PassRunner(settings.only(cluster), kind)
    try:
        wanted = Wanted(target, source, dry_run, running_transactions_timeout_s, timeout_s, say)
        planned = _judged_move(runner, settings, cluster, account, wanted)
        if isinstance(planned, Exit):
            return planned
        sql, params = statement(planned, running_transactions_timeout_s)
        call = Call(account, planned.target, sql, params, timeout_s)
        return _follow(
            runner, cluster=cluster, move=planned, call=call, timeout_s=timeout_s, say=say
        )
    finally:
        runner.close()


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the operator asked of the switchover (switchover's arguments)."""

    target: NodeAddress | None
    source: NodeAddress | None
    dry_run: bool
    running_transactions_timeout_s: int | None
    timeout_s: float
    say: Callable[[str], None]


def _judged_move(
    runner: PassRunner,
    settings: Settings,
    cluster: ClusterSettings,
    account: Endpoint,
    wanted: Wanted,
) -> Move | Exit:
    """Step 1 under the pass lock: the move to make, or the exit code of a refusal, of a
    target that is the primary already, or of a dry run (its steps said)."""
    target, say = wanted.target, wanted.say
    run = settings.run
    wait_s = (run.max_runtime_ms + run.interval_ms) / 1000
    with _lock_within(runner, cluster.name, wait_s) as held:
        if not held:
            lock = runner.store.lock_path(cluster.name)
            refusal = Refusal(
                Why.LOCK_HELD,
                f"the pass lock {lock} stayed held for {wait_s:g} s (another switchover, or "
                "a pass that does not end); try again",
            )
            say(describe_refusal(cluster.name, target, refusal))
            return Exit.BAD_INPUT
        now = runner.run(Mode.STATUS)
        if now.outcome in (Outcome.FAILED, Outcome.BAD_INPUT):
            say(f"cluster {cluster.name}: switchover not started: {summary(now)}")
            return now.outcome.exit_code
        planned = _plan(now, account, target, wanted.source)
        if isinstance(planned, Refusal):
            say(describe_refusal(cluster.name, target, planned))
            return Exit.BAD_INPUT
        if isinstance(planned, NodeAddress):
            say(f"cluster {cluster.name}: {planned} is the primary already; nothing to do")
            return Exit.OK
        lines = steps(
            cluster.name,
            planned,
            user=account.user,
            writer_hostgroup=cluster.hostgroups.writer,
            brownout=cluster.brownout,
            running_transactions_timeout_s=wanted.running_transactions_timeout_s,
            timeout_s=wanted.timeout_s,
        )
        for line in lines:
            say(line)
        if wanted.dry_run:
            say(f"cluster {cluster.name}: dry run: nothing changed")
            return Exit.OK
    return planned


def _plan(
    now: PassResult, account: Endpoint, target: NodeAddress | None, source: NodeAddress | None
) -> Move | Refusal | NodeAddress:
    if target is not None:
        return check(now, target, node_admin=True)
    assert source is not None
    fit = successor(now, source, node_admin=True)
    if isinstance(fit, Refusal):
        return fit
    uuids = {n: u for n in fit if (u := uuid_of(now, n)) is not None}
    found = candidates(account, [n for n in fit if n in uuids], uuids)
    if isinstance(found, str):
        return Refusal(Why.NO_CANDIDATE, found)
    return check(now, elect(found).node, node_admin=True)


_MS = re.compile(r"; \d+ ms$")


def _follow(
    runner: PassRunner,
    *,
    cluster: ClusterSettings,
    move: Move,
    call: Call,
    timeout_s: float,
    say: Callable[[str], None],
) -> Exit:
    name = cluster.name
    hooks = CommandHooks(runner.settings, lambda: runner.store, cluster, say)

    def ended(code: Exit, why: str) -> Exit:
        hooks.ended(move.source, move.target, code is Exit.OK, why)
        return code

    call.start()
    said = ""
    reported = False
    for result, late in passes_until(runner, timeout_s):
        ours = result.outcome is not Outcome.BUSY
        if ours:
            line = _MS.sub("", summary(result))
            if line != said:
                say(f"pass: {summary(result)}")
                said = line
        hooks.passed(result)
        if result.outcome in (Outcome.FAILED, Outcome.BAD_INPUT):
            say(
                f"cluster {name}: switchover to {move.target}: a pass failed; the group goes on "
                "with the switch and the next passes follow it"
            )
            return ended(result.outcome.exit_code, f"a pass failed: {result.message}")
        # a failed call is reported after a pass of ours has shown what the group has now
        failed = call.finished.is_set() and call.error is not None
        if failed and (ours or late):
            say(
                f"cluster {name}: group_replication_set_as_primary on {move.target} failed: "
                f"{call.error}; ProxySQL follows the group as it is (see the pass above)"
            )
            return ended(Exit.FAILED, f"group_replication_set_as_primary failed: {call.error}")
        if call.finished.is_set() and call.error is None:
            if not reported:
                reported = True
                say(f"cluster {name}: group_replication_set_as_primary: {call.answer}")
            if _writes_alone(runner, cluster, move.target):
                say(f"cluster {name}: switchover to {move.target} done")
                return ended(Exit.OK, f"{move.target} writes alone")
        if late:
            waiting = (
                "the writer hostgroup to hold it"
                if call.finished.is_set()
                else "group_replication_set_as_primary to return"
            )
            say(
                f"cluster {name}: switchover to {move.target}: not done within {timeout_s:g} s "
                f"(--timeout), still waiting for {waiting}; passes go on following the group"
            )
            return ended(Exit.FAILED, f"not done within {timeout_s:g} s: waiting for {waiting}")
    raise AssertionError("passes_until never ends")


def _writes_alone(runner: PassRunner, cluster: ClusterSettings, target: NodeAddress) -> bool:
    """ProxySQL's runtime writer hostgroup routes to the target alone, as a pass reads it (a
    daemon's pass may have made the move): read from ProxySQL, not from a pass of ours."""
    hostgroups = cluster.hostgroups
    rows = runner.admin().read_rows([hostgroups.writer])
    return LiveLayout.of(rows, hostgroups).writes_alone(target)
