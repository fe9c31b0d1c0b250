"""One cluster's events told to its hooks: the events of each of its passes (passes.events),
the condition last told (the state directory's `told` file, so a scheduler's next process and
a restarted daemon go on from it), and where the JSON goes: a daemon's queue of the cluster's
own, or a scheduler process's detached hand-over.

Only a pass that acts tells anything: a dry run, `status`, a paused or a standby pass tell no
hook and write no `told` file (a ProxySQL Cluster's acting checker tells them). A paused
cluster's blind pass (blindness is found before the pause is asked) tells nothing either."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from checker_core.core.events import Condition
from checker_core.core.leadership import Role
from checker_core.core.model import NodeAddress
from checker_core.core.settings import ClusterSettings, HookSettings, Settings
from checker_core.edges import hook_state
from checker_core.edges.hooks import HookQueue, Told, send_detached
from checker_core.edges.memory import StateStore
from checker_core.passes.events import (
    Event,
    condition_of,
    later_events,
    pass_events,
    switchover_event,
)
from checker_core.passes.plugin import ActionsDone
from checker_core.passes.result import Mode, PassResult

Document = Mapping[str, object]


class Sink(Protocol):
    """Where a cluster's event documents go."""

    def send(self, documents: Sequence[Document]) -> None: ...


def wall_stamp(wall: float) -> str:
    """The event's time in UTC, to the millisecond (a hook's reader compares it with its own
    logs; the checker's durations are never taken from it)."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall))
    return f"{whole}.{int(wall % 1 * 1000):03d}Z"


class Announcer:
    """One cluster's: it knows that cluster alone (a daemon makes one per cluster loop)."""

    def __init__(
        self,
        settings: Settings,
        cluster: ClusterSettings,
        store: StateStore,
        sink: Sink | None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.checker = settings.checker.value
        self.proxysql = f"{settings.proxysql.host}:{settings.proxysql.port}"
        self.cluster = cluster
        self.store = store
        self.sink = sink
        self.wall = wall
        self.warnings: list[str] = []  # a `told` file that could not be written, said once
        self._told: Condition | None = None
        self._told_read = False

    @property
    def hooks(self) -> HookSettings | None:
        return self.cluster.hooks

    def after_pass(self, result: PassResult, mode: Mode = Mode.APPLY) -> tuple[Event, ...]:
        """The pass's events (for the daemon's timeline too), each the hooks want sent."""
        if mode is not Mode.APPLY or result.role is Role.STANDBY:
            return ()
        events = pass_events(result, self.told())
        if events and self.hooks is not None and self.store.paused(self.cluster.name):
            # a blind pass ends before the pause is asked: a paused cluster tells nothing,
            # and what it would have told is told after the resume if it still holds
            return ()
        now = condition_of(result)
        if now is not None and now is not self._told:
            self._told = now
            if self.hooks is not None:  # no hook: nothing to go on from, nothing written
                failure = hook_state.record_told(self.store, self.cluster.name, now.label)
                if failure is not None:
                    self.warnings.append(failure)
        self.send(events)
        return events

    def after_actions(self, done: ActionsDone) -> tuple[Event, ...]:
        events = later_events(self.cluster.name, done)
        self.send(events)
        return events

    def told(self) -> Condition | None:
        if not self._told_read:
            self._told_read = True
            if self.hooks is not None:
                self._told = Condition.named(hook_state.told(self.store, self.cluster.name) or "")
        return self._told

    def send(self, events: tuple[Event, ...]) -> None:
        hooks = self.hooks
        if hooks is None or self.sink is None or not events:
            return
        at = wall_stamp(self.wall())
        groups = self.cluster.hostgroups
        hostgroups = {
            "writer": groups.writer,
            "reader": groups.reader,
            "backup_writer": groups.backup_writer,
            "offline": groups.offline,
        }
        documents = [
            e.document(self.checker, self.proxysql, at, hostgroups)
            for e in events
            if hooks.wants(e.kind.label)
        ]
        if documents:
            self.sink.send(documents)


class QueueSink:
    """A daemon cluster's: its own HookQueue."""

    def __init__(self, hooks: HookSettings, cluster: str, said: Callable[[Told], None]) -> None:
        self.queue = HookQueue(hooks, cluster, said)

    def send(self, documents: Sequence[Document]) -> None:
        for document in documents:
            self.queue.offer(document)

    def close(self, wait_s: float) -> int:
        return self.queue.close(wait_s)


class DetachedSink:
    """A scheduler process's: the events of its passes kept, then handed to one detached
    process per cluster once the passes and their lines are done (`hand_over`)."""

    def __init__(self, settings: Settings, store: StateStore) -> None:
        self.settings = settings
        self.store = store
        self.kept: list[Document] = []

    def send(self, documents: Sequence[Document]) -> None:
        self.kept.extend(documents)

    def hand_over(self, cluster: ClusterSettings) -> str | None:
        """The cluster's events to a process of their own; what went wrong, in words."""
        if not self.kept or cluster.hooks is None:
            return None
        documents, self.kept = self.kept, []
        try:
            self.store.ensure_dir()
        except OSError as exc:
            return f"{len(documents)} event(s) not told: {self.store.state_dir}: {exc.strerror}"
        return send_detached(
            cluster.hooks,
            documents,
            lambda k: hook_state.slot_path(self.store, cluster.name, k),
            hook_state.outcomes_path(self.store, cluster.name),
        )


class SchedulerHooks:
    """A scheduler process's clusters that have hooks, each with its announcer and its
    detached hand-over. What could not be handed over comes back in words, per cluster."""

    def __init__(self, settings: Settings, store: StateStore) -> None:
        self.clusters: dict[str, tuple[Announcer, DetachedSink]] = {}
        for cluster in settings.clusters:
            if cluster.hooks is not None:
                sink = DetachedSink(settings, store)
                self.clusters[cluster.name] = (Announcer(settings, cluster, store, sink), sink)

    def earlier(self) -> list[tuple[str, dict[str, object]]]:
        """What the hook processes of earlier passes did, per cluster (each outcome once)."""
        found: list[tuple[str, dict[str, object]]] = []
        for name, (announcer, _) in self.clusters.items():
            for line in hook_state.take_outcomes(announcer.store, name):
                try:
                    outcome = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a full disk: nothing to say of it
                if isinstance(outcome, dict):
                    found.append((name, outcome))
        return found

    def after_passes(self, results: list[PassResult]) -> list[tuple[str, str]]:
        for result in results:
            found = self.clusters.get(result.cluster)
            if found is not None:
                found[0].after_pass(result)
        return self._hand_over()

    def after_actions(self, done: list[tuple[str, ActionsDone]]) -> list[tuple[str, str]]:
        for cluster, actions in done:
            found = self.clusters.get(cluster)
            if found is not None:
                found[0].after_actions(actions)
        return self._hand_over()

    def _hand_over(self) -> list[tuple[str, str]]:
        said: list[tuple[str, str]] = []
        for name, (announcer, sink) in self.clusters.items():
            said.extend((name, warning) for warning in announcer.warnings)
            announcer.warnings.clear()
            failure = sink.hand_over(announcer.cluster)
            if failure is not None:
                said.append((name, failure))
        return said

    def tell(self, event: Event) -> list[tuple[str, str]]:
        """An event of a command's own (a switchover's end), handed over at once."""
        found = self.clusters.get(event.cluster)
        if found is not None:
            found[0].send((event,))
        return self._hand_over()


class CommandHooks:
    """A switchover command's hooks: the events of its passes, then its own end, each handed
    over at once; what goes wrong is said the command's way. Nothing when the cluster has no
    hook (the state store is not even asked for)."""

    def __init__(
        self,
        settings: Settings,
        store: Callable[[], StateStore],
        cluster: ClusterSettings,
        say: Callable[[str], None],
    ) -> None:
        self.name = cluster.name
        self.say = say
        self.hooks = SchedulerHooks(settings, store()) if cluster.hooks is not None else None

    def passed(self, result: PassResult) -> None:
        if self.hooks is not None:
            self._said(self.hooks.after_passes([result]))

    def ended(self, old: NodeAddress | None, new: NodeAddress, done: bool, why: str) -> None:
        if self.hooks is not None:
            self._said(self.hooks.tell(switchover_event(self.name, old, new, done, why)))

    def _said(self, failures: list[tuple[str, str]]) -> None:
        for _, failure in failures:
            self.say(f"cluster {self.name}: hooks: {failure}")
