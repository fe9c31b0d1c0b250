"""The invariants of the simulated world, judged on samples: what ProxySQL routes and stages, what
the world is (the cluster models' truth), what the checker says (/status), taken every few tens
of milliseconds by the observer. Pure: a `Judge` is fed samples in time order and events (a pause
begun, a command's exit) and returns violations, each named by its invariant's number.

The numbers are issue 39's:
 1 never more ONLINE writers than max_writers
 2 no route to a node the world knows is out (dead, frozen, not Primary, evicted; not writable
   for the writer) for longer than the detection bound
 3 the writer hostgroup never empty while a writable node exists, beyond the bound
 4 a node healthy for a while is back in its hostgroups within the recovery bound; no live
   process left on an eviction list (at quiescence), none its peers always heard on one ever
 5 nothing the checker changed outside itself is left changed at quiescence (variables,
   staged rows, eviction lists)
 6 pause, standby, deferred and dry-run change nothing; an operator's staged edit is never
   loaded or reverted by the checker
 7 what the checker says (/status writers, a command's exit code) matches what ProxySQL routes,
   and no node the world says is healthy is judged down
 8 no traceback, no dead or hung daemon, no pass over its deadline
 9 a hook is told only what a pass did (tests/world/hooks_told.py, judged at the end of a run)
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

ONLINE = "ONLINE"
# the states of a member that owes nothing to anyone (not a donor, not joining)
SETTLED = frozenset({"Synced", "ONLINE"})
# how long a checker's LOAD may hold an operator's staged edit aside before writing it back
EDIT_ASIDE_S = 1.0
# a cluster's latest passes that loaded a change, kept to tell who took a node out
LOADED_PASSES_KEPT = 20


@dataclass(frozen=True, slots=True)
class Row:
    """One mysql_servers / runtime_mysql_servers row, as far as the invariants care."""

    hostgroup: int
    node: str  # "host:port"
    status: str
    weight: int = 0


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """One managed cluster: its hostgroups, and the bounds its configuration promises."""

    name: str
    kind: str
    writer: int
    reader: int
    backup_writer: int
    offline: int
    max_writers: int
    detect_s: float  # a node out of the world is out of the routes within this
    recover_s: float  # a node healthy this long is back in its hostgroups
    status_s: float  # what /status says matches runtime within this

    @property
    def managed(self) -> frozenset[int]:
        return frozenset((self.writer, self.reader, self.backup_writer, self.offline))


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at the world."""

    at: float  # seconds since the world was ready (monotonic)
    runtime: tuple[Row, ...]
    staged: tuple[Row, ...]
    truth: Mapping[str, Mapping[str, Any]]  # cluster name -> the model's truth()
    # cluster name -> the /status record of its checker, when the daemon answered
    status: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LoadedPass:
    """A pass whose plan went live, read from its checker's log, on the world's clock."""

    cluster: str
    began: float
    ended: float
    # node -> why the pass took it out of a hostgroup (the change's own words)
    removed: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: int
    at: float
    cluster: str
    what: str

    def line(self) -> str:
        return f"invariant {self.invariant} at {self.at:.2f}s [{self.cluster}]: {self.what}"


def online(rows: Iterable[Row], hostgroup: int) -> set[str]:
    return {r.node for r in rows if r.hostgroup == hostgroup and r.status == ONLINE}


def present(rows: Iterable[Row], hostgroups: Iterable[int]) -> set[str]:
    """Nodes the checker routes to in those hostgroups (ProxySQL's own SHUN counts as routed:
    the monitor's call, not the checker's)."""
    wanted = set(hostgroups)
    return {r.node for r in rows if r.hostgroup in wanted and r.status in (ONLINE, "SHUNNED")}


def _locked(method: Callable[P, T]) -> Callable[P, T]:
    """The judge is fed by the observer's thread and told of events by the world's threads."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        judge = args[0]
        assert isinstance(judge, Judge)
        with judge.lock:
            return method(*args, **kwargs)

    return run


class Judge:
    """Feeds on samples in time order; keeps when each bad condition began, so a condition is a
    violation only once it has lasted longer than its bound. One Judge per world run."""

    def __init__(self, clusters: Iterable[ClusterSpec]) -> None:
        self.clusters = {c.name: c for c in clusters}
        # (invariant, cluster, subject) -> when the condition was first seen (sample time)
        self._since: dict[tuple[int, str, str], float] = {}
        self._reported: set[tuple[int, str, str]] = set()
        # (cluster, why) -> (held since, staged rows of its hostgroups when the hold began):
        # paused, or blind (the checker sees none of its nodes), the checker changes nothing
        self._held: dict[tuple[str, str], tuple[float, frozenset[Row]]] = {}
        # (cluster, why) -> when a hold takes effect (a pass under way may still finish)
        self._holding: dict[tuple[str, str], float] = {}
        # cluster -> the time the checker may act again (resume, daemon back); quiet until then
        self._quiet_until: dict[str, float] = {}
        # staged edits of the operator not yet loaded: (row it staged, runtime row before)
        self._edits: dict[str, tuple[Row, Row | None]] = {}
        # when each edit's UPDATE went out and when its answer came (sample time)
        self._edit_at: dict[str, tuple[float, float]] = {}
        # checkers' LOADs: (their connection's last read of staging, the LOAD), sample time
        self.loads: list[tuple[float, float]] = []
        # (invariant 6) an edit's row missing from staging since (set aside for a LOAD: brief)
        self._edit_missing: dict[str, float] = {}
        # edits the operator has LOADed: (row, when) until runtime shows them
        self._loaded: dict[str, tuple[Row, float]] = {}
        # (cluster, why) -> since when a held cluster's staging shows rows as live that were
        # not: another cluster's LOAD sets them aside for a moment and writes them back
        self._aside_since: dict[tuple[str, str], float] = {}
        # (cluster, why) -> the operator's edit of a held cluster's row announced and not seen
        # landed yet: (the row before, the row after, when announced)
        self._landing: dict[tuple[str, str], tuple[Row, Row, float]] = {}
        # (cluster, why) -> when the cause of a hold began, and the staged routes seen then
        self._began: dict[tuple[str, str], tuple[float, frozenset[Row] | None]] = {}
        # cluster -> its latest passes that loaded a change (who took a node out, and when)
        self._loaded_passes: dict[str, list[LoadedPass]] = {}
        self.checks = 0
        self.violations: list[Violation] = []
        # what happened that is no violation but worth saying (a documented limit met)
        self.notes: list[str] = []
        self.lock = threading.RLock()
        self._slow_admin = False
        # holds whose staged rows may change (the checker acts late, not never)
        self._unwatched: set[tuple[str, str]] = set()

    # -- events from the world -------------------------------------------------------------

    @_locked
    def paused_after(
        self,
        cluster: str,
        at: float,
        why: str = "paused",
        since: float | None = None,
        *,
        watch_staging: bool = True,
    ) -> None:
        """The checker changes nothing from `at` on: paused, or blind. `since`: when the
        cause began (the cut of a blind cluster): a pass under way then may still finish,
        but none takes a healthy node out for what it could not see (checked once it holds).
        Without `watch_staging`, only the bounds wait (a checker starved of CPU may act, late)."""
        self._holding[cluster, why] = at
        if since is not None:
            self._began[cluster, why] = (since, None)
        if not watch_staging:
            self._unwatched.add((cluster, why))

    @_locked
    def resumed(self, cluster: str, at: float, why: str = "paused") -> None:
        self._unwatched.discard((cluster, why))
        self._aside_since.pop((cluster, why), None)
        self._landing.pop((cluster, why), None)
        self._began.pop((cluster, why), None)
        self._held.pop((cluster, why), None)
        self._holding.pop((cluster, why), None)
        self.hold(cluster, at)

    @_locked
    def pass_loaded(self, done: LoadedPass) -> None:
        """A checker's pass made its plan live (its log says so once it has ended)."""
        passes = self._loaded_passes.setdefault(done.cluster, [])
        passes.append(done)
        del passes[:-LOADED_PASSES_KEPT]

    @_locked
    def held(self, cluster: str, why: str = "paused") -> bool:
        """Whether the hold has taken effect: staging is watched for it."""
        return (cluster, why) in self._held

    @_locked
    def paused_edit(self, cluster: str, before: Row, after: Row, at: float) -> None:
        """The operator staged `after` over `before`, a row of the paused cluster's own
        hostgroups, at `at`: it stays staged, as every other row, until the resume (S5: a
        pause changes nothing, staging included)."""
        if (cluster, "paused") not in self._held:
            return
        for key, (since, rows) in list(self._held.items()):
            if key[0] == cluster:  # a blind hold beside the pause watches the same rows
                self._held[key] = (since, (rows - {before}) | {after})
                # a sample read before the edit landed shows the row as it was (as live, or
                # an earlier edit still staged), for no longer than a set-aside lasts
                self._landing[key] = (before, after, at)

    @_locked
    def stalled(self, on: bool, at: float) -> None:
        """ProxySQL's admin answers slowly: no bound that needs the checker to act holds, for
        any cluster, until it answers again (then they start again)."""
        self._slow_admin = on
        if not on:
            for cluster in self.clusters:
                self.hold(cluster, at)

    def quiet(self, cluster: str) -> bool:
        """Held, or about to be: no bound that needs the checker to act holds."""
        return self._slow_admin or any(c == cluster for c, _ in (*self._held, *self._holding))

    @_locked
    def hold(self, cluster: str, at: float) -> None:
        """The checker of this cluster could not act until `at` (paused, restarted, killed):
        bounds that need it to act start again from then."""
        self._quiet_until[cluster] = max(self._quiet_until.get(cluster, 0.0), at)
        for key in [k for k in self._since if k[1] == cluster and k[0] in (2, 3, 4, 7)]:
            self._since[key] = max(self._since[key], at)

    @_locked
    def staged_edit(
        self, cluster: str, row: Row, before: Row | None, at: tuple[float, float] | None = None
    ) -> None:
        """The operator staged `row` (over the live `before`); `at`: when his UPDATE went out
        and when its answer came."""
        self._edits[cluster] = (row, before)
        if at is not None:
            self._edit_at[cluster] = at

    @_locked
    def checker_loads(self, windows: Iterable[tuple[float, float]]) -> None:
        """Checkers' LOADs as the admin relay passed them on: each with its connection's last
        read of staging before it (an edit staged in between is one it could not see)."""
        self.loads.extend(windows)

    def _unseen_by_a_load(self, cluster: str) -> tuple[float, float] | None:
        """The checker's LOAD whose last read of staging went out before the operator's edit
        was answered, and which itself went out after his edit did: it carries what it could
        not have seen (ProxySQL loads the whole table, without a transaction)."""
        sent_answered = self._edit_at.get(cluster)
        if sent_answered is None:
            return None
        sent, answered = sent_answered
        for read, load in reversed(self.loads):
            if read <= answered and load >= sent:
                return read, load
        return None

    @_locked
    def edits_loaded(self, at: float, *, superseded: bool = False) -> None:
        """The operator's LOAD: every pending edit is to be live now (`superseded`: his own
        command rewrote and loaded them, so nothing more is expected of them)."""
        for cluster, pending in self._edits.items():
            if not superseded:
                self._loaded[cluster] = (pending[0], at)
        if superseded:
            self._loaded.clear()
        self._edits.clear()
        self._edit_at.clear()
        self._edit_missing.clear()

    @_locked
    def violation(self, invariant: int, at: float, cluster: str, what: str) -> Violation:
        found = Violation(invariant, at, cluster, what)
        self.violations.append(found)
        return found

    # -- the sample ------------------------------------------------------------------------

    @_locked
    def sample(self, s: Sample) -> list[Violation]:
        found: list[Violation] = []
        for spec in self.clusters.values():
            for key, (since, routes) in list(self._began.items()):
                if key[0] == spec.name and routes is None and s.at >= since:
                    self._began[key] = (since, _routes(s.staged, spec))
            for key, at in list(self._holding.items()):
                if key[0] == spec.name and s.at >= at:
                    del self._holding[key]
                    rows = frozenset(r for r in s.staged if r.hostgroup in spec.managed)
                    self._held[key] = (s.at, rows)
                    found += self._taken_out(s, spec, key)
            truth = s.truth.get(spec.name)
            if truth is None:
                continue
            nodes: Mapping[str, Mapping[str, Any]] = truth["nodes"]
            found += self._writers(s, spec)
            found += self._routes(s, spec, nodes)
            found += self._writer_present(s, spec, nodes)
            found += self._back(s, spec, nodes)
            found += self._evicted_unfairly(s, spec, nodes)
            found += self._paused_unchanged(s, spec)
            found += self._edit_kept(s, spec)
            found += self._status_matches(s, spec)
        return found

    def _lasting(  # noqa: PLR0917 - one condition's identity, state and bound
        self, invariant: int, cluster: str, subject: str, bad: bool, at: float, bound: float
    ) -> bool:
        """Whether a condition has now lasted longer than its bound (reported once per
        stretch)."""
        self.checks += 1
        key = (invariant, cluster, subject)
        if not bad:
            self._since.pop(key, None)
            self._reported.discard(key)
            return False
        since = self._since.setdefault(key, at)
        if at - since > bound and key not in self._reported:
            self._reported.add(key)
            return True
        return False

    def _writers(self, s: Sample, spec: ClusterSpec) -> list[Violation]:
        self.checks += 1
        writers = online(s.runtime, spec.writer)
        if len(writers) > spec.max_writers:
            return [
                self.violation(
                    1, s.at, spec.name, f"{len(writers)} ONLINE writers: {sorted(writers)}"
                )
            ]
        return []

    def _routes(
        self, s: Sample, spec: ClusterSpec, nodes: Mapping[str, Mapping[str, Any]]
    ) -> list[Violation]:
        found = []
        writers = online(s.runtime, spec.writer)
        readers = online(s.runtime, spec.reader)
        for node, world in nodes.items():
            out = (
                world["process"] in ("killed", "frozen", "isolated", "joining")
                or not world["in_primary"]
            )
            quiet = self.quiet(spec.name)
            bad_reader = node in readers and (out or not world["readable"]) and not quiet
            bad_writer = node in writers and (out or not world["writable"]) and not quiet
            for subject, bad in (("reader " + node, bad_reader), ("writer " + node, bad_writer)):
                if self._lasting(2, spec.name, subject, bad, s.at, spec.detect_s):
                    found.append(
                        self.violation(
                            2,
                            s.at,
                            spec.name,
                            f"{subject} routed for over {spec.detect_s:.1f}s while the world "
                            f"says process={world['process']} state={world['state']} "
                            f"in_primary={world['in_primary']} writable={world['writable']}",
                        )
                    )
        return found

    def _writer_present(
        self, s: Sample, spec: ClusterSpec, nodes: Mapping[str, Mapping[str, Any]]
    ) -> list[Violation]:
        writable = sorted(n for n, w in nodes.items() if w["writable"] and w["reach"] == "LISTEN")
        empty = not online(s.runtime, spec.writer)
        bad = empty and bool(writable) and not self.quiet(spec.name)
        if self._lasting(3, spec.name, "writer", bad, s.at, spec.detect_s):
            return [
                self.violation(
                    3,
                    s.at,
                    spec.name,
                    f"no ONLINE writer for over {spec.detect_s:.1f}s while {writable} could write",
                )
            ]
        return []

    def _back(
        self, s: Sample, spec: ClusterSpec, nodes: Mapping[str, Mapping[str, Any]]
    ) -> list[Violation]:
        found = []
        routed = present(s.runtime, (spec.writer, spec.reader, spec.backup_writer))
        for node, world in nodes.items():
            # a donor serves reads only as a last resort (G5, G10): not owed a place
            healthy = world["readable"] and world["reach"] == "LISTEN" and world["state"] in SETTLED
            bad = healthy and node not in routed and not self.quiet(spec.name)
            if self._lasting(4, spec.name, node, bad, s.at, spec.recover_s):
                found.append(
                    self.violation(
                        4,
                        s.at,
                        spec.name,
                        f"{node} healthy ({world['state']}) for over {spec.recover_s:.1f}s "
                        "and in none of its hostgroups",
                    )
                )
        return found

    def _evicted_unfairly(
        self, s: Sample, spec: ClusterSpec, nodes: Mapping[str, Mapping[str, Any]]
    ) -> list[Violation]:
        """No process its peers have always heard is on an eviction list: only the checker
        evicts here, and only a member gone silent to its peers is fair game (a restarted
        node's new process at the old one's address is not)."""
        listed = {u for w in nodes.values() for u in (w.get("evict_list") or ())}
        found = []
        for node, world in nodes.items():
            identity = world.get("identity")
            self.checks += 1
            if identity is None or identity not in listed or world.get("silenced", True):
                continue
            key = (4, spec.name, f"evicted {identity}")
            if key in self._reported:
                continue
            self._reported.add(key)
            found.append(
                self.violation(
                    4,
                    s.at,
                    spec.name,
                    f"{node}'s process {identity} ({world['process']}) is on an eviction list, "
                    "and its peers never stopped hearing it",
                )
            )
        return found

    def _paused_unchanged(self, s: Sample, spec: ClusterSpec) -> list[Violation]:
        found = []
        now = frozenset(r for r in s.staged if r.hostgroup in spec.managed)
        for (cluster, why), (since, rows) in list(self._held.items()):
            if cluster != spec.name or (cluster, why) in self._unwatched:
                continue
            self.checks += 1
            if now == rows:
                self._aside_since.pop((cluster, why), None)
                self._landing.pop((cluster, why), None)
            elif self._not_landed(s, (cluster, why), rows, now) or self._set_aside(
                s, (cluster, why), rows, now
            ):
                continue
            if now != rows:
                self._held[cluster, why] = (since, now)
                gone = sorted(f"{r.hostgroup}/{r.node}/{r.status}/{r.weight}" for r in rows - now)
                new = sorted(f"{r.hostgroup}/{r.node}/{r.status}/{r.weight}" for r in now - rows)
                found.append(
                    self.violation(
                        6, s.at, spec.name, f"staged rows changed while {why}: -{gone} +{new}"
                    )
                )
        return found

    def _taken_out(self, s: Sample, spec: ClusterSpec, key: tuple[str, str]) -> list[Violation]:
        """The routes to nodes the world says are healthy that a pass took out between the
        hold's cause and the hold (`since`). A pass that began after the cut saw none of the
        nodes and must change nothing; one under way at the cut may have reached a node before
        it and failed to reach another after it: acting on its own failed probe is the rule
        (G16, retry_down permitting; seed 527450), said as a note with the pass's reason."""
        since, before = self._began.pop(key, (0.0, None))
        truth = s.truth.get(spec.name)
        if before is None or truth is None:
            return []
        nodes: Mapping[str, Mapping[str, Any]] = truth["nodes"]
        found = []
        # out of every route: a move between the writer and the readers is no taking out
        routed = {r.node for r in _routes(s.staged, spec)}
        for node in sorted({r.node for r in before} - routed):
            world = nodes.get(node, {})
            self.checks += 1
            if not (world.get("readable") and world.get("state") in SETTLED):
                continue
            movers = [
                p
                for p in self._loaded_passes.get(spec.name, [])
                if node in p.removed and p.ended >= since
            ]
            if movers and all(p.began < since for p in movers):
                mover = movers[0]
                self.notes.append(
                    f"{s.at:.2f}s [{spec.name}]: {node} taken out by a pass under way at the "
                    f"cut (began {since - mover.began:.2f}s before it, ended "
                    f"{mover.ended - since:.2f}s after): {mover.removed[node]}"
                )
                continue
            began = ", ".join(f"{p.began - since:+.2f}s" for p in movers) or "none logged"
            found.append(
                self.violation(
                    6,
                    s.at,
                    spec.name,
                    f"{node} taken out of every hostgroup while {key[1]}, and the world "
                    f"says it is healthy ({world.get('state')}); the passes that took it out "
                    f"began at {began} from the cut",
                )
            )
        return found

    def _not_landed(
        self, s: Sample, key: tuple[str, str], rows: frozenset[Row], now: frozenset[Row]
    ) -> bool:
        """Whether staging differs from the hold's rows only by the operator's announced edit
        not landed yet, for no longer than a set-aside lasts (seed 779107: the row still held
        his earlier edit, which is not live)."""
        landing = self._landing.get(key)
        if landing is None:
            return False
        before, after, at = landing
        return now == (rows - {after}) | {before} and s.at - at <= EDIT_ASIDE_S

    def _set_aside(
        self, s: Sample, key: tuple[str, str], rows: frozenset[Row], now: frozenset[Row]
    ) -> bool:
        """Whether staging differs from what the hold began with only by rows put back to
        what is live, for no longer than a LOAD's set-aside lasts: another cluster's LOAD sets
        an edit staged here aside and writes it back (or a sample was read before the
        operator's edit landed). Longer, it is a change."""
        live = frozenset(
            Row(r.hostgroup, r.node, ONLINE if r.status == "SHUNNED" else r.status, r.weight)
            for r in s.runtime
        )
        if not now - rows <= live or (rows - now) & live:
            return False
        since = self._aside_since.setdefault(key, s.at)
        return s.at - since <= EDIT_ASIDE_S

    def _edit_kept(self, s: Sample, spec: ClusterSpec) -> list[Violation]:
        found = self._edit_live(s, spec)
        pending = self._edits.get(spec.name)
        if pending is None:
            return found
        self.checks += 1
        row, before = pending
        staged = [r for r in s.staged if (r.hostgroup, r.node) == (row.hostgroup, row.node)]
        live = [r for r in s.runtime if (r.hostgroup, r.node) == (row.hostgroup, row.node)]
        if row not in staged:
            # a checker's LOAD sets a foreign edit aside for a moment and writes it back
            since = self._edit_missing.setdefault(spec.name, s.at)
            if s.at - since > EDIT_ASIDE_S:
                now = staged[0] if staged else "no row"
                found.append(
                    self.violation(
                        6, s.at, spec.name, f"the operator's staged edit {row} reverted (now {now})"
                    )
                )
                self._edits.pop(spec.name, None)
            return found
        self._edit_missing.pop(spec.name, None)
        if row in live and before != row:
            unseen = self._unseen_by_a_load(spec.name)
            if unseen is not None:
                read, load = unseen
                self.notes.append(
                    f"{s.at:.2f}s [{spec.name}]: the operator's edit {row} was staged between a "
                    f"checker's last read of staging and its LOAD ({1000 * (load - read):.1f} ms "
                    "apart), which carried it live"
                )
            else:
                before_said = "nothing live" if before is None else f"live {before.weight}"
                found.append(
                    self.violation(
                        6,
                        s.at,
                        spec.name,
                        f"the operator's staged edit {row} loaded (over {before_said})",
                    )
                )
            self._edits.pop(spec.name, None)
            self._edit_at.pop(spec.name, None)
        return found

    def _edit_live(self, s: Sample, spec: ClusterSpec) -> list[Violation]:
        loaded = self._loaded.get(spec.name)
        if loaded is None:
            return []
        self.checks += 1
        row, at = loaded
        if row in s.runtime:
            del self._loaded[spec.name]
            return []
        if s.at - at > spec.status_s:
            if row not in s.staged and s.at - at <= spec.status_s + EDIT_ASIDE_S:
                # neither live nor staged: a checker's LOAD may have it set aside this moment
                # (staged as live, for no longer than a set-aside lasts; seed 63953)
                return []
            del self._loaded[spec.name]
            if row in s.staged:
                # his LOAD came while a checker's LOAD had the edit set aside: ProxySQL loads
                # the whole table and has no transaction (docs/maintenance.md); still his
                self.notes.append(
                    f"{s.at:.2f}s [{spec.name}]: the operator's LOAD of {row} came while a "
                    "checker's LOAD had it set aside: staged, not live"
                )
                return []
            return [
                self.violation(6, s.at, spec.name, f"the operator LOADed {row}, and it is not live")
            ]
        return []

    def _status_matches(self, s: Sample, spec: ClusterSpec) -> list[Violation]:
        record = s.status.get(spec.name)
        if record is None:
            return []
        found = [] if self.quiet(spec.name) else self._healthy_not_down(s, spec, record)
        writers = record.get("writers")
        said = set(writers or ())
        routed = online(s.runtime, spec.writer)
        # a paused checker's passes still read what ProxySQL routes and say it; null is
        # "unknown" (a pass that read nothing: another process held the lock), no claim
        bad = writers is not None and said != routed and not self._quiet_but_paused(spec.name)
        if self._lasting(7, spec.name, "status writers", bad, s.at, spec.status_s):
            found.append(
                self.violation(
                    7,
                    s.at,
                    spec.name,
                    f"/status says writers {sorted(said)}, ProxySQL routes {sorted(routed)} "
                    f"for over {spec.status_s:.1f}s",
                )
            )
        return found

    def _quiet_but_paused(self, cluster: str) -> bool:
        """Quiet for a reason other than a pause (ProxySQL's admin slow, blind)."""
        holds = (*self._held, *self._holding)
        return self._slow_admin or any(c == cluster and why != "paused" for c, why in holds)

    def _healthy_not_down(
        self, s: Sample, spec: ClusterSpec, record: Mapping[str, Any]
    ) -> list[Violation]:
        """A node the world says is healthy and reachable is never judged down for longer
        than the checker takes to see it again (issue 38: a node judged on what it did)."""
        truth = s.truth.get(spec.name)
        if truth is None:
            return []
        found = []
        for said in record.get("nodes") or ():
            node = str(said.get("node"))
            world = truth["nodes"].get(node)
            if world is None:
                continue
            healthy = world["readable"] and world["reach"] == "LISTEN"
            bad = healthy and said.get("verdict") == "down"
            if self._lasting(7, spec.name, "down " + node, bad, s.at, spec.status_s):
                found.append(
                    self.violation(
                        7,
                        s.at,
                        spec.name,
                        f"{node} judged down ({said.get('reason')}) while the world says "
                        f"it is healthy ({world['state']}) for over {spec.status_s:.1f}s",
                    )
                )
        return found


def _routes(staged: Iterable[Row], spec: ClusterSpec) -> frozenset[Row]:
    """The staged ONLINE rows of the writer and reader hostgroups, weights aside."""
    return frozenset(
        Row(r.hostgroup, r.node, r.status)
        for r in staged
        if r.hostgroup in (spec.writer, spec.reader) and r.status == ONLINE
    )


def quiescent(
    spec: ClusterSpec,
    at: float,
    runtime: Iterable[Row],
    staged: Iterable[Row],
    truth: Mapping[str, Any],
) -> list[Violation]:
    """Invariants 4 and 5 once the world has been healed and left alone: staging is what runs
    (no plan of the checker left staged, nothing of it half-written), and no eviction list holds
    an entry."""
    found = []
    runtime_rows = {
        (r.hostgroup, r.node, ONLINE if r.status == "SHUNNED" else r.status)
        for r in runtime
        if r.hostgroup in spec.managed
    }
    staged_rows = {(r.hostgroup, r.node, r.status) for r in staged if r.hostgroup in spec.managed}
    # a row ProxySQL keeps OFFLINE_HARD while clients hold connections is runtime's alone
    runtime_rows = {
        r for r in runtime_rows if r[2] != "OFFLINE_HARD" or (r[0], r[1], r[2]) in staged_rows
    }
    if runtime_rows != staged_rows:
        found.append(
            Violation(
                5,
                at,
                spec.name,
                "staging differs from runtime at rest: staged-only "
                f"{sorted(staged_rows - runtime_rows)}, runtime-only "
                f"{sorted(runtime_rows - staged_rows)}",
            )
        )
    live = {w.get("identity") for w in truth["nodes"].values() if w["process"] == "running"}
    for node, world in truth["nodes"].items():
        listed = list(world.get("evict_list") or ())
        if listed:
            # a live process kept out of its cluster, or a stale entry never cleared
            kept_out = [u for u in listed if u in live]
            found.append(
                Violation(
                    4 if kept_out else 5,
                    at,
                    spec.name,
                    f"{node}'s eviction list holds {listed} at rest"
                    + (f" ({kept_out} a running process)" if kept_out else " (stale)"),
                )
            )
    return found


def variables_kept(
    before: Mapping[str, str], after: Mapping[str, str], at: float
) -> list[Violation]:
    """Invariant 5 for ProxySQL's global variables: none changed by the run."""
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if changed:
        detail = ", ".join(f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in changed[:8])
        return [Violation(5, at, "*", f"ProxySQL variables changed: {detail}")]
    return []
