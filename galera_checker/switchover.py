"""A planned move of the writer (Galera): `switchover --to HOST:PORT`.

The switchover is a pin, not a side channel: it records the chosen writer in the state directory,
and every pass (this command's, a running daemon's, the scheduler's) prefers that node over
weights and fail_back while it may write. The move itself is then an ordinary pass: the target
becomes the writer and the old writer drains (OFFLINE_SOFT in the writer hostgroup, staged after
the demotion, so no statement leaves two ONLINE writers) until its connections are done or
drain_timeout_ms has passed, then takes its backup writer and reader places. The command runs
passes until that is done. `switchover --release` removes the pin: weights and fail_back decide
again from the next pass on. It changes no ProxySQL global variable: the client sessions the
drain must move, and what each will see, are said before the move (checker_core.core.attached).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.attached import (
    AUTO_INCREMENT_DELAY,
    AUTO_INCREMENT_DELAY_TIMEOUT,
    what_clients_see,
)
from checker_core.core.model import NodeAddress
from checker_core.core.writers import pin_passed_over
from checker_core.edges import proxysql_sessions as sessions_edge
from checker_core.edges.admin_errors import AdminError
from checker_core.exitcodes import Exit
from checker_core.passes.announce import CommandHooks
from checker_core.passes.repeat import passes_until
from checker_core.passes.result import Mode, Outcome, PassResult
from checker_core.passes.runner import PassRunner
from checker_core.report import summary

if TYPE_CHECKING:
    from collections.abc import Callable

    from checker_core.core.settings import ClusterSettings, Settings
    from checker_core.passes.plugin import CheckerKind


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the target cannot take the writer role now."""

    reason: str


def refusal(result: PassResult, target: NodeAddress) -> Refusal | None:
    """What the policy says of the pass the pin would make: the target refused exactly when no
    pass would make it the writer (not in the roster, no writer row, not healthy, may not write,
    barred by an operator, lagging behind a node that is not), in the pass's own words; a pass
    that could not judge the cluster refuses too."""
    decision = result.decision
    what_if = result.what_if()
    if decision is None or decision.blind or what_if is None:
        return Refusal(f"the cluster could not be judged: {summary(result)}")
    if target not in decision.roster.addresses:
        return Refusal(f"{target} is not in the roster of cluster {result.cluster}")
    pinned = what_if.pinned(target)
    if pinned.assignment.writers[:1] == (target,):
        return None
    why = pin_passed_over(pinned.assignment.why_writers)
    return Refusal(
        why or f"the policy keeps {target} from writing: {pinned.assignment.why_writers}"
    )


def next_writer(result: PassResult, source: NodeAddress) -> NodeAddress | Refusal:
    """`--from`: the node a failover would make the writer if `source`, the writer, failed now
    (the what-if of `run --dry-run --assume-down`)."""
    from checker_core.core.whatif import Assumed

    what_if = result.what_if()
    if result.decision is None or result.decision.blind or what_if is None:
        return Refusal(f"the cluster could not be judged: {summary(result)}")
    if result.routed_writers != (source,):
        writers = ", ".join(map(str, result.routed_writers)) or "none"
        return Refusal(f"{source} is not the writer; the writer is {writers}")
    after = what_if.decision({source: Assumed.DOWN})
    if not after.assignment.writers:
        return Refusal(f"no node could take over from {source}: {after.assignment.why_writers}")
    return after.assignment.writers[0]


def switchover(
    settings: Settings,
    kind: CheckerKind,
    cluster: ClusterSettings,
    target: NodeAddress | None,
    *,
    dry_run: bool,
    say: Callable[[str], None],
    source: NodeAddress | None = None,
) -> Exit:
    """Check the target (or, given `source`, the writer, choose the node a failover would),
    pin it, and run passes until it writes alone (bounded by the drain
    timeout and a few intervals); a dry-run prints the first pass's plan and changes nothing."""
    runner = PassRunner(settings.only(cluster), kind)
    try:
        now = runner.run(Mode.STATUS)
        if target is None:
            assert source is not None
            chosen = next_writer(now, source)
            if isinstance(chosen, Refusal):
                say(f"cluster {cluster.name}: switchover from {source} refused: {chosen.reason}")
                return Exit.BAD_INPUT if now.outcome is not Outcome.FAILED else Exit.FAILED
            target = chosen
            say(f"cluster {cluster.name}: switchover from {source}: the next writer is {target}")
        refused = refusal(now, target)
        if refused is not None:
            say(f"cluster {cluster.name}: switchover to {target} refused: {refused.reason}")
            return Exit.BAD_INPUT if now.outcome is not Outcome.FAILED else Exit.FAILED
        if now.routed_writers == (target,):
            if dry_run:
                say(f"cluster {cluster.name}: {target} is the writer already; nothing to do")
                return Exit.OK
            # the pin still says who the next passes keep, whatever fail_back would prefer
            runner.store.pin_writer(cluster.name, target)
            say(f"cluster {cluster.name}: {target} is the writer already; pinned there")
            return Exit.OK
        _clients(runner, cluster, now.routed_writers, say)
        if dry_run:
            from checker_core.report import render

            say(render(runner.run(Mode.DRY_RUN, pin=target), cluster.hostgroups, with_sql=True))
            return Exit.OK
        runner.store.pin_writer(cluster.name, target)
        old = now.routed_writers[0] if now.routed_writers else None
        return _move(runner, cluster, target, say, old)
    finally:
        runner.close()


def _clients(
    runner: PassRunner,
    cluster: ClusterSettings,
    writers: tuple[NodeAddress, ...],
    say: Callable[[str], None],
) -> None:
    """The sessions attached to the writer(s) about to drain, and what each will see, said
    before anything moves. Reads only."""
    try:
        delay = runner.admin().read_runtime_variables(
            [AUTO_INCREMENT_DELAY, AUTO_INCREMENT_DELAY_TIMEOUT]
        )
    except AdminError:
        delay = {}  # named by its variables instead of their values
    for writer in writers:
        try:
            attached = sessions_edge.attached_sessions(
                runner.admin(), cluster.hostgroups.writer, writer
            )
        except AdminError as exc:
            say(f"cluster {cluster.name}: the client sessions on {writer} were not read ({exc})")
            continue
        lines = what_clients_see(
            writer, attached, drain_timeout_ms=cluster.drain_timeout_ms, delay=delay
        )
        for line in lines:
            say(f"cluster {cluster.name}: {line}")


def _move(
    runner: PassRunner,
    cluster: ClusterSettings,
    target: NodeAddress,
    say: Callable[[str], None],
    old: NodeAddress | None = None,
) -> Exit:
    timeout_s = cluster.drain_timeout_ms / 1000 + 5 * runner.settings.run.interval_ms / 1000
    hooks = CommandHooks(runner.settings, lambda: runner.store, cluster, say)

    def ended(done: bool, why: str) -> None:
        hooks.ended(old, target, done, why)

    ran = False
    for result, late in passes_until(runner, timeout_s, pin=target):
        if result.outcome is not Outcome.BUSY:
            ran = True
            say(summary(result))
        hooks.passed(result)
        if result.outcome in (Outcome.FAILED, Outcome.BAD_INPUT):
            # the pin is the operator's word, kept: a daemon's next pass may well finish the move
            say(
                f"cluster {cluster.name}: switchover to {target}: its pass failed; the pin "
                "stays and the next passes go on with it (switchover --release drops it)"
            )
            ended(False, f"its pass failed: {result.message}")
            return result.outcome.exit_code
        if result.moved_to(target):
            say(f"cluster {cluster.name}: switchover to {target} done")
            ended(True, f"{target} writes alone")
            return Exit.OK
        if late:
            why = "not finished in time" if ran else "the pass lock stayed held by another process"
            say(
                f"cluster {cluster.name}: switchover to {target}: {why}; the pin stays and "
                "the next passes go on with it (switchover --release drops it)"
            )
            ended(False, why)
            return Exit.FAILED
    raise AssertionError("passes_until never ends")
