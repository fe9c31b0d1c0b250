"""A schedule of faults and operator actions drawn from a seed: the same seed and the same world
give the same schedule, step for step, so a failing run can be replayed and cut down.

A step happens `at` seconds after the world is ready. A fault has a heal: a second step, later,
that undoes it (a thaw after a freeze, a restart after a kill, a resume after a pause). Steps
are plain data, printed one per line; `shrunk` gives the shorter schedules a failing one is
cut down to.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class ClusterShape:
    """What the schedule may act on: one cluster of the world."""

    name: str
    kind: str  # "galera" or "gr"
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Step:
    """One thing done to the world."""

    at: float  # seconds after the world is ready
    action: str  # a name of FAULTS, HEALS or OPERATOR
    cluster: str
    node: str | None = None  # None: the cluster as a whole
    fields: tuple[tuple[str, object], ...] = ()
    # which fault this step heals (the index of that fault in the schedule), or None
    heals: int | None = None
    # a fault's number in the schedule (heals point at it)
    number: int = 0

    def line(self) -> str:
        where = self.cluster + (f" {self.node}" if self.node else "")
        extra = " ".join(f"{k}={v}" for k, v in self.fields)
        healing = f" (heals #{self.heals})" if self.heals is not None else ""
        return (
            f"#{self.number:<4} {self.at:8.2f}s {self.action:<14} {where} {extra}{healing}".rstrip()
        )

    def field(self, name: str, default: object = None) -> object:
        return dict(self.fields).get(name, default)


@dataclass(frozen=True, slots=True)
class FaultKind:
    """A fault: its name, what undoes it, the kinds of cluster it applies to, its weight in the
    draw, and how long it may last (seconds)."""

    name: str
    heal: str
    kinds: tuple[str, ...]
    weight: int
    lasts: tuple[float, float]
    node_level: bool = True


# node faults, each with the step that ends it
FAULTS: tuple[FaultKind, ...] = (
    FaultKind("kill", "restart", ("galera", "gr"), 6, (0.5, 5.0)),
    FaultKind("freeze", "thaw", ("galera", "gr"), 6, (0.5, 6.0)),
    FaultKind("slow", "unslow", ("galera", "gr"), 3, (1.0, 6.0)),
    FaultKind("cut", "uncut", ("galera", "gr"), 3, (0.5, 4.0)),
    FaultKind("isolate", "rejoin", ("galera", "gr"), 4, (0.5, 6.0)),
    FaultKind("donor", "undonor", ("galera",), 2, (1.0, 5.0)),
    FaultKind("desync", "resync", ("galera",), 2, (1.0, 5.0)),
    FaultKind("read_only", "read_write", ("galera",), 2, (1.0, 5.0)),
    FaultKind("reject", "accept", ("galera",), 2, (1.0, 5.0)),
    FaultKind("maintenance", "unmaintain", ("galera",), 2, (1.0, 5.0)),
    FaultKind("stop_gr", "start_gr", ("gr",), 4, (1.0, 5.0)),
    # operator actions that last: they are faults of the checker's own making
    FaultKind("pause", "resume", ("galera", "gr"), 2, (1.0, 5.0), node_level=False),
    FaultKind("staged_edit", "load_edit", ("galera", "gr"), 2, (0.3, 3.0), node_level=False),
    # the checker loses its route to every node of the cluster at once: it must change nothing
    FaultKind("blind", "unblind", ("galera", "gr"), 1, (1.0, 5.0), node_level=False),
    # the cluster's daemon short of CPU: stopped and continued every few tens of milliseconds
    FaultKind("starve", "feed", ("galera", "gr"), 1, (1.0, 4.0), node_level=False),
    # the cluster's hook hangs until the checker kills it (hooks_told.py): no pass may wait
    FaultKind("hook_hang", "hook_unhang", ("galera", "gr"), 2, (1.0, 8.0), node_level=False),
    # ProxySQL's admin interface answers slowly (every answer held back)
    FaultKind("admin_slow", "admin_unslow", ("proxysql",), 2, (1.0, 4.0), node_level=False),
)

# operator actions and checker events that have no heal
OPERATOR: tuple[tuple[str, tuple[str, ...], int], ...] = (
    ("switchover", ("galera", "gr"), 2),
    # adopt: with templates in place it says so and changes nothing; --force rebuilds them from
    # the live rows (and must carry no one else's staged edit live)
    ("adopt", ("galera", "gr"), 1),
    ("adopt_force", ("galera", "gr"), 1),
    # two commands at once on the same cluster: two switchovers, a switchover and a pass
    ("two_switchovers", ("galera", "gr"), 1),
    ("switchover_and_pass", ("galera", "gr"), 1),
    ("scheduler_pass", ("galera", "gr"), 2),
    ("dry_run", ("galera", "gr"), 2),
    # doctor reads what routes writes around the checker and changes nothing
    ("doctor", ("galera", "gr"), 1),
    # switchover --dry-run (to the writer, to another node, or --release): the pin untouched
    ("switchover_dry_run", ("galera", "gr"), 1),
    ("reload", ("galera", "gr"), 1),
    ("daemon_restart", ("galera", "gr"), 1),
    ("daemon_kill", ("galera", "gr"), 1),
    ("lose_state", ("galera", "gr"), 1),
    # ProxySQL's admin interface fails the checker's next statement of a kind (tests/world/
    # admin_relay.py): a LOAD refused, a write dropped with its connection before or after
    # ProxySQL has it, a LOAD whose answer never comes back
    ("load_refused", ("proxysql",), 3),
    ("write_dropped", ("proxysql",), 3),
    ("write_unanswered", ("proxysql",), 3),
    ("load_unanswered", ("proxysql",), 3),
)
# the schedule's line of events for ProxySQL itself
PROXYSQL = ClusterShape("proxysql", "proxysql", ())

HEALS = frozenset(f.heal for f in FAULTS)


@dataclass(frozen=True, slots=True)
class Schedule:
    seed: int
    steps: tuple[Step, ...] = field(default_factory=tuple)

    def lines(self) -> Iterator[str]:
        yield f"seed {self.seed}: {len(self.steps)} steps"
        for step in self.steps:
            yield step.line()

    @property
    def faults(self) -> int:
        """Faults and operator actions (a heal is part of its fault, not counted)."""
        return sum(1 for s in self.steps if s.heals is None)

    @property
    def end(self) -> float:
        return max((s.at for s in self.steps), default=0.0)


def draw(
    seed: int,
    clusters: Sequence[ClusterShape],
    seconds: float,
    *,
    gap: tuple[float, float] = (0.5, 3.0),
    operator_share: float = 0.2,
    exclude: frozenset[str] = frozenset(),
    slow_ms: tuple[int, ...] = (50, 100, 200),
) -> Schedule:
    """Every cluster gets its own line of events: a fault, its heal, a pause, the next one;
    now and then a second fault in the same cluster overlaps the first (never on the same
    node, never on a majority of the nodes at once). An operator action replaces a fault with
    probability `operator_share`. `exclude` names actions never drawn."""
    rng = random.Random(seed)
    steps: list[Step] = []
    for shape in clusters:
        faults = [f for f in FAULTS if shape.kind in f.kinds and f.name not in exclude]
        operators = [(n, w) for n, kinds, w in OPERATOR if shape.kind in kinds and n not in exclude]
        # ProxySQL's own line: mostly one-shot failures of a statement, and further apart
        share = 0.7 if shape.kind == "proxysql" else operator_share
        spread = 2.0 if shape.kind == "proxysql" else 1.0
        t = rng.uniform(*gap)
        # node -> the time its current fault is healed
        busy: dict[str, float] = {}
        cluster_busy_until = 0.0
        while t < seconds:
            if operators and rng.random() < share:
                name = rng.choices([n for n, _ in operators], [w for _, w in operators])[0]
                steps.append(Step(round(t, 3), name, shape.name))
                t += rng.uniform(*gap) * spread
                continue
            if not faults:
                t += rng.uniform(*gap) * spread
                continue
            kind = rng.choices(faults, [f.weight for f in faults])[0]
            lasts = rng.uniform(*kind.lasts)
            healed_at = min(t + lasts, seconds)
            if kind.node_level:
                free = [n for n in shape.nodes if busy.get(n, 0.0) <= t]
                faulty_now = len(shape.nodes) - len(free)
                # a minority of the nodes at most: the checker is judged on clusters that can work
                if not free or (faulty_now + 1) * 2 > len(shape.nodes):
                    # wait for the next heal
                    t = min(v for v in busy.values() if v > t)
                    continue
                node = rng.choice(free)
                busy[node] = healed_at
                fields = _fields(kind.name, rng, slow_ms)
                steps.append(Step(round(t, 3), kind.name, shape.name, node, fields))
                # a GR node rebuilt (a new auto.cnf) comes back under a new server_uuid
                rebuilt = kind.heal == "restart" and shape.kind == "gr" and rng.random() < 0.3
                heal_fields = (("new_identity", True),) if rebuilt else ()
                steps.append(
                    Step(round(healed_at, 3), kind.heal, shape.name, node, heal_fields, heals=-1)
                )
            else:
                if cluster_busy_until > t:
                    t = cluster_busy_until
                    continue
                cluster_busy_until = healed_at
                # an operator's staged edit: a row nobody manages, or the roster's own template
                fields = (("template", rng.random() < 0.5),) if kind.name == "staged_edit" else ()
                steps.append(Step(round(t, 3), kind.name, shape.name, None, fields))
                steps.append(Step(round(healed_at, 3), kind.heal, shape.name, heals=-1))
            # mostly one fault at a time; sometimes the next starts before this one heals
            t = (t if rng.random() < 0.25 else healed_at) + rng.uniform(*gap)
    return Schedule(seed, _numbered(steps))


def _fields(
    fault: str, rng: random.Random, slow_ms: tuple[int, ...]
) -> tuple[tuple[str, object], ...]:
    if fault == "slow":
        return (("delay_ms", rng.choice(slow_ms)),)
    return ()


def _numbered(steps: list[Step]) -> tuple[Step, ...]:
    """Steps in time order, numbered; every heal points at the fault it ends (the heal was
    drawn right after its fault, with heals=-1)."""
    paired: list[tuple[Step, int | None]] = []
    for index, step in enumerate(steps):
        paired.append((step, index - 1 if step.heals == -1 else None))
    order = sorted(range(len(paired)), key=lambda i: (paired[i][0].at, i))
    number_of = {old: new for new, old in enumerate(order, start=1)}
    out = []
    for old in order:
        step, fault = paired[old]
        out.append(
            replace(step, number=number_of[old], heals=None if fault is None else number_of[fault])
        )
    return tuple(out)


def without(schedule: Schedule, numbers: frozenset[int]) -> Schedule:
    """The schedule with those steps left out, and the heals of left-out faults with them."""
    kept = tuple(s for s in schedule.steps if s.number not in numbers and (s.heals not in numbers))
    return Schedule(schedule.seed, kept)


def until(schedule: Schedule, seconds: float) -> Schedule:
    """The schedule's steps before `seconds`, with the heal of every fault kept (a prefix still
    ends healed)."""
    kept_faults = {s.number for s in schedule.steps if s.heals is None and s.at < seconds}
    kept = tuple(
        s
        for s in schedule.steps
        if (s.heals is None and s.number in kept_faults) or (s.heals in kept_faults)
    )
    return Schedule(schedule.seed, kept)


def shrunk(schedule: Schedule, failed_at: float) -> Iterator[Schedule]:
    """Shorter schedules to try, shortest first in spirit: the prefix up to the failure, then
    that prefix with one fault (and its heal) dropped at a time, latest first."""
    prefix = until(schedule, failed_at + 0.001)
    yield prefix
    faults = [s.number for s in prefix.steps if s.heals is None]
    for number in reversed(faults):
        yield without(prefix, frozenset({number}))
