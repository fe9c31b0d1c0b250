"""cluster.evict_unresponsive_nodes: a member silent for unresponsive_after_ms is out at once
(whatever retry_down would wait for), and evicted only when a majority of its view answers and
their replication is stalled on it (causal reads that do not complete). A member that answered
within the time, or that is silent only to the checker, is never evicted."""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.decide import decide, view_of
from checker_core.core.hysteresis import NodeMemory
from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.schema import Checker
from checker_core.core.verdict import State
from checker_core.edges.memory import StateStore
from checker_core.edges.pending import PendingProbes
from checker_core.passes.plugin import ActionsDone, AfterPass
from galera_checker.actions import GaleraActions
from galera_checker.eviction import CausalRead, ReadOutcome, stalled_on, unresponsive_members
from galera_checker.node_calls import CAUSAL_READ, EVICT_SQL
from galera_checker.policy import GaleraPolicy
from tests.unit.fakes import HealthyProber
from tests.unit.galera_cases import (
    HG,
    N1,
    N2,
    N3,
    cluster_settings,
    placed,
    probe_ok,
    rows_of,
    steady,
)

ROSTER = (N1, N2, N3)
UUID = {N1: "u-1", N2: "u-2", N3: "u-3"}


def alive(node: NodeAddress) -> ProbeResult:
    return probe_ok(node, wsrep_gcomm_uuid=UUID[node])


def silent(node: NodeAddress, waited_ms: float = 0.0) -> ProbeResult:
    return ProbeResult(node, None, "timed out", waited_ms, ProbeFailure.SILENT)


def passes(
    after_ms: int, answers: list[tuple[float, ProbeResult]], retry_down: int = 3
) -> list[Any]:
    """Decisions of passes at the given times (monotonic s), N1 (the writer) answering as
    given, each pass's memory carried to the next and every plan made live."""
    cluster = cluster_settings(retry_down=retry_down, unresponsive_after_ms=after_ms)
    view = view_of(rows_of(steady(N1)), cluster)
    memory: Mapping[NodeAddress, NodeMemory] = {}
    made = []
    for now, n1 in answers:
        probes = {N1: n1, N2: alive(N2), N3: alive(N3)}
        decision = decide(
            GaleraPolicy(),
            view,
            probes,
            memory=memory,
            cluster=cluster,
            in_use={},
            now=now,
            interval_s=2.0,
        )
        made.append(decision)
        memory = decision.memory
    return made


def test_a_writer_silent_for_the_time_is_out_at_once_not_after_retry_down() -> None:
    made = passes(1000, [(100.0, silent(N1)), (100.5, silent(N1)), (101.0, silent(N1))])
    first, middle, last = made
    assert N1 in first.assignment.writers and N1 in middle.assignment.writers
    assert first.memory[N1].silent_since == 100.0 == last.memory[N1].silent_since
    assert first.due[N1] == 101.0, "asked again when its time is up"
    assert N1 not in last.assignment.writers
    assert last.verdicts[N1].state is State.DOWN and last.verdicts[N1].hard
    assert "silent for 1000 ms" in last.verdicts[N1].reason


def test_without_the_option_retry_down_decides_as_before() -> None:
    made = passes(0, [(100.0, silent(N1)), (100.5, silent(N1)), (101.0, silent(N1))])
    assert all(N1 in d.assignment.writers for d in made)
    assert not made[-1].verdicts[N1].hard
    assert made[0].due.get(N1) != 101.0


def test_the_silence_counts_from_the_first_question_left_unanswered() -> None:
    """A pass that waited 600 ms for the answer saw a silence that began 600 ms before."""
    made = passes(1000, [(100.6, silent(N1, 600.0)), (101.0, silent(N1, 600.0))])
    assert made[0].memory[N1].silent_since == pytest.approx(100.0)
    assert made[0].due[N1] == pytest.approx(101.0)
    assert N1 not in made[1].assignment.writers


def test_an_answer_within_the_time_starts_the_silence_again() -> None:
    made = passes(
        1000,
        [(100.0, silent(N1)), (100.6, alive(N1)), (100.9, silent(N1)), (101.5, silent(N1))],
    )
    assert made[1].memory[N1].silent_since is None
    assert made[3].memory[N1].silent_since == 100.9
    assert N1 in made[3].assignment.writers, "0.6 s of silence since it last answered"


def test_silence_survives_the_state_file() -> None:
    kept = NodeMemory(routable=True, bad_streak=2, bad_since=5.0, silent_since=5.0)
    assert NodeMemory.from_json(kept.to_json()) == kept
    assert kept.without_times().silent_since is None


# ---------------------------------------------------------------- whom to evict


def memory_silent_since(since: float) -> dict[NodeAddress, NodeMemory]:
    return {
        N1: NodeMemory(routable=True, identity="u-1", silent_since=since),
        N2: NodeMemory(routable=True, identity="u-2"),
        N3: NodeMemory(routable=True, identity="u-3"),
    }


@pytest.mark.parametrize(
    ("silent_s", "wanted"), [(0.4, ()), (1.0, (N1,)), (3.0, (N1,))], ids=["short", "at", "long"]
)
def test_a_member_is_a_candidate_once_silent_for_the_time(
    silent_s: float, wanted: tuple[NodeAddress, ...]
) -> None:
    probes = {N1: silent(N1), N2: alive(N2), N3: alive(N3)}
    found = unresponsive_members(
        probes,
        ROSTER,
        memory_silent_since(100.0),
        UUID,
        (N2,),
        now=100.0 + silent_s,
        after_ms=1000,
    )
    assert tuple(e.node for e in found) == wanted
    if found:
        (eviction,) = found
        assert eviction.allowed and eviction.unresponsive
        assert eviction.survivor == N2 and eviction.others == (N3,)
        assert eviction.uuid == "u-1"


@pytest.mark.parametrize(
    ("probe", "wanted"),
    [
        (silent(N1), (N1,)),
        (ProbeResult(N1, None, "not heard: cut short", 40.0, ProbeFailure.UNHEARD), (N1,)),
        (ProbeResult(N1, None, "refused", 1.0, ProbeFailure.REFUSED), ()),
        (alive(N1), ()),
    ],
    ids=["silent", "unheard", "refused", "answered"],
)
def test_a_silence_once_proven_goes_on_until_an_answer(
    probe: ProbeResult, wanted: tuple[NodeAddress, ...]
) -> None:
    """A member silent since a question it left unanswered for its whole read timeout is still
    silent when this pass's probe of it was cut short (unheard: the pass stopped waiting at the
    threshold, before a whole read timeout again): only an answer ends the silence. Deciding
    the eviction a pass later cost a frozen writer's cluster a whole probe wait of writes."""
    probes = {N1: probe, N2: alive(N2), N3: alive(N3)}
    found = unresponsive_members(
        probes, ROSTER, memory_silent_since(100.0), UUID, (N2,), now=101.0, after_ms=1000
    )
    assert tuple(e.node for e in found) == wanted


def test_a_minority_that_answers_evicts_nobody() -> None:
    """Two of three silent: the one that answers is no majority of its view of 3."""
    probes = {N1: silent(N1), N2: silent(N2), N3: alive(N3)}
    memory = {**memory_silent_since(100.0), N2: NodeMemory(routable=True, silent_since=100.0)}
    found = unresponsive_members(probes, ROSTER, memory, UUID, (N3,), now=102.0, after_ms=1000)
    assert found and not any(e.allowed for e in found)
    assert all("no majority" in (e.withheld or "") for e in found)


ANSWERED = CausalRead(ReadOutcome.ANSWERED, 3.0)
STALLED = CausalRead(ReadOutcome.STALLED, 500.0)
UNKNOWN = CausalRead(ReadOutcome.UNKNOWN, why="(1040, 'Too many connections')")
N4, N5 = NodeAddress("127.0.0.1", 3314), NodeAddress("127.0.0.1", 3315)


@pytest.mark.parametrize(
    ("reads", "view", "proven"),
    [
        ({N2: STALLED, N3: STALLED}, 3, True),
        ({N2: STALLED, N3: ANSWERED}, 3, False),  # one replicates: the group flows
        ({N2: STALLED, N3: UNKNOWN}, 3, False),  # a read that never ran proves nothing
        ({N2: UNKNOWN, N3: UNKNOWN}, 3, False),
        ({N2: STALLED, N3: STALLED, N4: STALLED, N5: UNKNOWN}, 5, True),  # 3 of 5 measured
        ({N2: STALLED, N3: STALLED, N4: UNKNOWN, N5: UNKNOWN}, 5, False),  # 2 of 5 is no majority
        ({N2: STALLED, N3: STALLED, N4: STALLED, N5: ANSWERED}, 5, False),
        ({N2: STALLED, N3: STALLED}, 0, False),  # the view's size unknown
        ({}, 3, False),
    ],
)
def test_the_stall_is_proven_by_a_measured_majority_and_disproven_by_any_answer(
    reads: dict[NodeAddress, CausalRead], view: int, proven: bool
) -> None:
    stall = stalled_on(reads, view)
    assert stall.proven is proven
    assert " 0 ms" not in stall.said, "a read that never ran is no number"
    if UNKNOWN in reads.values():
        assert "unknown ((1040, 'Too many connections'))" in stall.said


# ---------------------------------------------------------------- the actions


class Survivor:
    """A node_admin connection to a survivor: its member list, and a causal read that stalls
    (the read timeout ends it) or answers."""

    def __init__(
        self, node: NodeAddress, stalls: bool, log: list[tuple[object, ...]], hangs: bool = False
    ) -> None:
        self.node, self.stalls, self.log, self.hangs = node, stalls, log, hangs

    def cursor(self) -> Survivor:
        return self

    def __enter__(self) -> Survivor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: object = None) -> None:
        self.log.append((self.node, sql, args))
        if sql == CAUSAL_READ[0] and self.hangs:
            threading.Event().wait(2.0)  # longer than the pass has: its read is not done
        if sql == CAUSAL_READ[1] and self.stalls:
            raise TimeoutError("timed out")

    def fetchall(self) -> list[tuple[str, str]]:
        return [("u-1", str(N1)), ("u-2", str(N2)), ("u-3", str(N3))]


def survivors(
    stalling: set[NodeAddress],
    log: list[tuple[object, ...]],
    hanging: frozenset[NodeAddress] = frozenset(),
) -> Any:
    @contextlib.contextmanager
    def connect(account: object, node: NodeAddress, **timeouts: float) -> Iterator[Survivor]:
        yield Survivor(node, node in stalling, log, node in hanging)

    return connect


def after(
    tmp_path: Path,
    silent_s: float,
    *,
    acting: bool = True,
    now: float = 200.0,
    budget_s: float = 2.0,
) -> AfterPass:
    cluster = cluster_settings(unresponsive_after_ms=1000)
    made = passes(1000, [(now - silent_s, silent(N1)), (now, silent(N1))])
    probes = {N1: silent(N1), N2: alive(N2), N3: alive(N3)}
    decision = made[-1]
    memory = {n: replace(m, identity=UUID[n]) for n, m in decision.memory.items()}
    return AfterPass(
        cluster,
        replace(decision, memory=memory),
        probes,
        object(),  # type: ignore[arg-type]  # an account: the fake connect takes any
        StateStore(tmp_path, Checker.GALERA),
        budget_s,
        acting,
    )


def scheduler(actions: GaleraActions, given: AfterPass) -> ActionsDone:
    """A scheduler process: its pass, then what the pass left for after it (finish): what
    was done after the pass, else what the pass said."""
    passed = actions.after_pass(given)
    later = actions.finish()
    if not later:
        return passed
    (one,) = later
    assert one.cluster == given.cluster.name
    return one.done


def evicted_on(log: list[tuple[object, ...]]) -> list[object]:
    return [node for node, sql, args in log if sql == EVICT_SQL and args == ("evs.evict=u-1",)]


def test_a_silent_member_the_others_stall_on_is_evicted_through_them(tmp_path: Path) -> None:
    log: list[tuple[object, ...]] = []
    actions = GaleraActions(survivors({N2, N3}, log), lambda: 200.0)
    done = scheduler(actions, after(tmp_path, 1.5))
    assert done.evictions == 1, done
    assert sorted(evicted_on(log), key=str) == [N2, N3], "every survivor told"
    assert "evicted 127.0.0.1:3311 (gcomm uuid u-1)" in done.said[0]
    assert "silent for 1500 ms" in done.said[0] and "stalled" in done.said[0]
    assert (N2, CAUSAL_READ[0], None) in log, "a causal read, asked on each survivor"


def test_a_member_silent_only_to_the_checker_is_never_evicted(tmp_path: Path) -> None:
    """The survivors' causal reads answer: the group replicates, the silence is the checker's
    link to the member alone."""
    log: list[tuple[object, ...]] = []
    actions = GaleraActions(survivors({N2}, log), lambda: 200.0)
    done = scheduler(actions, after(tmp_path, 1.5))
    assert done.evictions == 0 and evicted_on(log) == []
    assert "not evicting 127.0.0.1:3311" in done.said[0]
    assert "the others replicate" in done.said[0]


def test_a_causal_read_not_done_in_time_is_no_proof(tmp_path: Path) -> None:
    """One survivor's read stalls, the other's is still under way when the eviction's own
    deadline comes (2.9 s of its 3 s gone by the time the view was read): one of a view of
    three measured stalled is no proof, so nothing is evicted."""
    log: list[tuple[object, ...]] = []
    clock = [200.0]
    hanging = survivors({N2}, log, frozenset({N3}))

    def connect(account: object, node: NodeAddress, **timeouts: float) -> Any:
        if not log:  # the view's connection, before any causal read
            clock[0] += 2.9
        return hanging(account, node, **timeouts)

    actions = GaleraActions(connect, lambda: clock[0])
    done = scheduler(actions, after(tmp_path, 1.5))
    assert done.evictions == 0 and evicted_on(log) == []
    assert "127.0.0.1:3313 unknown (not done by its deadline)" in done.said[0], done.said


def test_a_member_silent_for_less_than_the_time_is_not_asked_about(tmp_path: Path) -> None:
    log: list[tuple[object, ...]] = []
    actions = GaleraActions(survivors({N2, N3}, log), lambda: 200.0)
    done = actions.after_pass(after(tmp_path, 0.5))
    assert done.evictions == 0 and done.said == () and log == []


def test_a_dry_run_or_a_standby_only_says_what_it_would_do(tmp_path: Path) -> None:
    log: list[tuple[object, ...]] = []
    actions = GaleraActions(survivors({N2, N3}, log), lambda: 200.0)
    done = actions.after_pass(after(tmp_path, 1.5, acting=False))
    assert done.evictions == 0 and evicted_on(log) == []
    assert done.said[0].startswith("would evict 127.0.0.1:3311 through 127.0.0.1:3312")
    assert "the others stalled on it" in done.said[0]


def test_status_keeps_what_the_last_eviction_said() -> None:
    """/status shows the last eviction, and why, after the passes that followed it."""
    from checker_core.service.health import ClusterRecord
    from tests.unit.daemon_cases import galera_pass

    said = "evicted 127.0.0.1:3311 (gcomm uuid u-1) through 127.0.0.1:3312: silent for 1200 ms"
    evicting = replace(
        galera_pass(steady(N2)),
        evictions=1,
        unresponsive_evictions=1,
        node_actions=(said, "cleared nothing"),
    )
    record = ClusterRecord.first(evicting, 1.0)
    later = record.after(galera_pass(steady(N2)), 2.0).after(galera_pass(steady(N2)), 3.0)
    assert record.evictions == later.evictions == (said,)
    assert ClusterRecord.first(galera_pass(steady(N2)), 1.0).evictions == ()


# ---------------------------------------------------------------- the daemon's watch


def test_the_watch_says_when_its_unanswered_question_was_asked() -> None:
    """A question left unanswered for 0.8 s, judged at 50.0: the silence began at 49.2."""
    from checker_core.service.watch import Cause, Watched, changed

    policy = GaleraPolicy()
    watched = [Watched(N1, policy.watch_key(alive(N1).facts))]
    unanswered = ProbeResult(N1, None, "no answer in 800 ms", 800.0, ProbeFailure.SILENT)
    trigger = changed(watched, {N1: unanswered}, policy, now=50.0)
    assert trigger is not None and trigger.cause is Cause.UNANSWERED
    assert trigger.silent_since == {N1: pytest.approx(49.2)}
    refused = ProbeResult(N1, None, "refused", 1.0, ProbeFailure.REFUSED)
    other = changed(watched, {N1: refused}, policy, now=50.0)
    assert other is not None and other.silent_since == {}, "only silence is counted"


def test_with_the_option_the_watch_asks_every_node_not_only_the_writers() -> None:
    from checker_core.service.watch import watched_writers
    from tests.unit.daemon_cases import galera_pass

    result = galera_pass(steady(N1))
    policy = GaleraPolicy()
    assert [w.node for w in watched_writers([result], policy)] == [N1]
    assert [w.node for w in watched_writers([result], policy, everyone=True)] == [N1, N2, N3]


def test_the_watch_s_silence_counts_in_the_next_pass_of_a_node_still_silent() -> None:
    from checker_core.core.hysteresis import with_silence

    memory = {
        N1: NodeMemory(routable=True),
        N2: NodeMemory(routable=True, silent_since=48.0),
        N3: NodeMemory(routable=True),
    }
    merged = with_silence(memory, {N1: 49.2, N2: 49.0, N3: 49.1}, silent={N1, N2})
    assert merged[N1].silent_since == 49.2, "silent to the pass too: counted from the question"
    assert merged[N2].silent_since == 48.0, "an earlier count stands"
    assert merged[N3].silent_since is None, "it answered the pass: its silence is over"


class SilentWriter(HealthyProber):
    """Every node answers until `silent` is set; from then on N1 is silent, its probe having
    waited `waited_ms`."""

    def __init__(self, waited_ms: float, pending: type[PendingProbes] = PendingProbes) -> None:
        self.silent = False
        self.waited_ms = waited_ms
        self.pending = pending

    def start(self, nodes: Any, deadline: float) -> PendingProbes:
        pending = self.pending(tuple(nodes), 0.0)
        for node in nodes:
            answer = silent(node, self.waited_ms) if self.silent and node == N1 else alive(node)
            pending.results.put(answer)
        return pending


def test_a_writer_the_watch_found_silent_is_out_in_the_first_pass_that_finds_it_silent_too(
    tmp_path: Path,
) -> None:
    """The watch's question went unanswered at 99.0; the pass at 100.2 finds the writer silent
    too: it has been silent 1.2 s, past unresponsive_after_ms 1000, and it is out at once."""
    from checker_core.passes.result import Mode
    from tests.unit.config_cases import galera_runner, galera_settings
    from tests.unit.fakes import MemoryAdmin, ports
    from tests.unit.galera_cases import HG, templates

    now = [90.0]
    admin = MemoryAdmin([*templates(), *steady(N1)])
    prober = SilentWriter(200.0)
    settings = galera_settings(tmp_path)
    cluster = replace(settings.clusters[0], unresponsive_after_ms=1000, retry_down=3)
    settings = replace(settings, clusters=(cluster,))
    runner = galera_runner(
        tmp_path, settings=settings, **ports(admin, prober, clock=lambda: now[0])
    )
    runner.run(Mode.APPLY)  # settled, N1 the writer
    prober.silent = True
    now[0] = 100.2
    runner.silence_seen = {N1: 99.0}
    result = runner.run(Mode.APPLY)
    assert result.decision is not None
    assert N1 not in result.decision.assignment.writers, result.decision.verdicts[N1]
    assert result.decision.memory[N1].silent_since == 99.0
    assert runner.silence_seen == {}, "used once"
    online = {r.node for r in admin.runtime.values() if r.hostgroup_id == HG.writer}
    assert N1 not in online


def test_the_pass_that_decides_when_the_time_is_up_starts_before_it_by_its_wait() -> None:
    """A pass waits for a silent node's probe (here 0.4 s) before it decides: the pass that
    finds the time up is started that much before it."""
    cluster = cluster_settings(retry_down=3, unresponsive_after_ms=1000)
    view = view_of(rows_of(steady(N1)), cluster)
    probes = {N1: silent(N1), N2: alive(N2), N3: alive(N3)}
    decision = decide(
        GaleraPolicy(),
        view,
        probes,
        memory={},
        cluster=cluster,
        in_use={},
        now=100.0,
        interval_s=2.0,
        probe_wait_s=0.4,
    )
    assert decision.due[N1] == pytest.approx(100.6)


def test_a_pass_waits_for_a_silent_node_until_its_time_is_up_not_past_it(
    tmp_path: Path,
) -> None:
    """A node a pass found silent at 99.5 (unresponsive_after_ms 1000): the pass at 100.2 waits
    for its probe until 100.5 at most, the time it is out then, not its whole probe time; the
    pass at 101.0, past that, waits for it in full (its answer is how it comes back)."""
    from collections.abc import Collection

    from checker_core.edges.pending import PendingProbes
    from checker_core.passes.result import Mode

    asked: list[Mapping[NodeAddress, float]] = []

    class Recorded(PendingProbes):
        def collect(
            self,
            deadline: float,
            only: Collection[NodeAddress] | None = None,
            enough: Mapping[NodeAddress, float] | None = None,
        ) -> dict[NodeAddress, ProbeResult]:
            asked.append(dict(enough or {}))
            return super().collect(deadline, only, enough)

    now = [90.0]
    runner, _, _ = found_silent(tmp_path, SilentWriter(500.0, Recorded), now)
    asked.clear()
    now[0] = 100.2
    before = time.monotonic()
    runner.run(Mode.APPLY)
    after = time.monotonic()
    assert asked and set(asked[0]) == {N1}, asked
    # 0.3 s from when it was worked out, on this process's monotonic clock
    assert before + 0.3 <= asked[0][N1] <= after + 0.3
    asked.clear()
    now[0] = 101.0
    runner.run(Mode.APPLY)
    assert asked and asked[0] == {}, "past its time: waited for in full"


# ---------------------------------------------------------------- evidence, not the pass's time


class Galera:
    """node_admin connections to a cluster whose causal reads take `latency_s` per node
    (math.inf: stalled); a node in `refusing` turns connections away (1040). Each thread has a
    clock of its own, moved by the statements it runs, so a read's measured time is its own."""

    def __init__(self, latency_s: dict[NodeAddress, float], refusing: frozenset[NodeAddress]):
        self.latency_s, self.refusing = latency_s, refusing
        self.now, self.local = 200.0, threading.local()
        self.log: list[tuple[object, ...]] = []
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now + getattr(self.local, "offset", 0.0)

    def connect(self, account: object, node: NodeAddress, **timeouts: float) -> Any:
        import pymysql

        if node in self.refusing:
            raise pymysql.err.OperationalError(1040, "Too many connections")
        return contextlib.nullcontext(Statements(self, node, timeouts.get("wait_s")))


class Statements:
    def __init__(self, galera: Galera, node: NodeAddress, wait_s: float | None) -> None:
        self.galera, self.node, self.wait_s = galera, node, wait_s

    def cursor(self) -> contextlib.nullcontext[Statements]:
        return contextlib.nullcontext(self)

    def execute(self, sql: str, args: object = None) -> None:
        galera = self.galera
        galera.log.append((self.node, sql, args))
        if sql != CAUSAL_READ[1]:
            return
        assert self.wait_s is not None, "a causal read is given its wait"
        galera.waits.append(self.wait_s)
        took = galera.latency_s[self.node]
        local = galera.local
        local.offset = getattr(local, "offset", 0.0) + min(took, self.wait_s)
        if took > self.wait_s:
            raise TimeoutError("timed out")

    def fetchall(self) -> list[tuple[str, str]]:
        return [("u-1", str(N1)), ("u-2", str(N2)), ("u-3", str(N3))]


def whole(tmp_path: Path, budget_s: float = 2.0) -> AfterPass:
    """A pass over the whole cluster, every member answering in the Primary component."""
    from tests.unit.daemon_cases import galera_pass

    result = galera_pass(steady(N1), {n: alive(n) for n in ROSTER}, apply=False)
    assert result.decision is not None
    return AfterPass(
        cluster_settings(unresponsive_after_ms=1000),
        result.decision,
        result.probes,
        object(),  # type: ignore[arg-type]
        StateStore(tmp_path, Checker.GALERA),
        budget_s,
        True,
    )


def test_a_causal_read_that_never_ran_is_unknown_never_0_ms(tmp_path: Path) -> None:
    """A stalled survivor turns node_admin away (1040): its read is unknown, no answer that
    disproves the stall, and one read measured stalled of a view of three proves nothing."""
    galera = Galera({N2: math.inf, N3: math.inf}, frozenset({N3}))
    actions = GaleraActions(galera.connect, galera.monotonic)
    done = scheduler(actions, after(tmp_path, 1.5))
    assert done.evictions == 0 and evicted_on(galera.log) == []
    line = done.said[0]
    assert "127.0.0.1:3313 unknown (Too many connections (error 1040))" in line, line
    assert " 0 ms" not in line and "the others replicate" not in line, line


SLOW = {N1: 0.3, N2: 0.3, N3: 0.3}  # two sites: a causal read takes 0.3 s


@pytest.mark.parametrize(
    ("measured", "latency_s", "budget_s", "evicted", "said"),
    [
        # the pass has 0.57 s, too short for the wait a 0.3 s cluster needs: after the pass
        (True, {**SLOW, N2: math.inf, N3: math.inf}, 0.57, True, "stall wait 1200 ms, normal"),
        (True, SLOW, 2.0, False, "the others replicate"),
        (True, {**SLOW, N2: math.inf, N3: math.inf}, 2.0, True, "stall wait 1200 ms, normal"),
        (False, {N2: math.inf, N3: math.inf}, 2.0, True, "(stall wait 1000 ms, normal latency unk"),
    ],
    ids=["short-pass", "slow-cluster", "stalled", "never-measured"],
)
def test_the_stall_is_judged_against_the_clusters_own_latency(
    tmp_path: Path,
    *,
    measured: bool,
    latency_s: dict[NodeAddress, float],
    budget_s: float,
    evicted: bool,
    said: str,
) -> None:
    galera = Galera(SLOW, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    if measured:
        assert actions.after_pass(whole(tmp_path)) == ActionsDone()
        assert galera.waits, "the whole cluster's causal reads were measured"
    galera.latency_s, galera.waits = latency_s, []
    done = scheduler(actions, after(tmp_path, 1.5, budget_s=budget_s))
    assert (done.evictions == 1) is evicted, done
    assert said in " ".join(done.said + done.failed), done
    assert all(wait >= 0.5 for wait in galera.waits), "never a wait cut to the pass's time"


@pytest.mark.parametrize(
    ("later_s", "probes", "asked"),
    [
        (1.0, {}, 3),  # measured a moment ago
        (11.0, {}, 6),
        (11.0, {N3: silent(N3)}, 3),  # a member silent: not the cluster's normal
    ],
    ids=["soon", "later", "not-whole"],
)
def test_the_normal_latency_is_measured_now_and_then_while_the_cluster_is_whole(
    tmp_path: Path, later_s: float, probes: dict[NodeAddress, ProbeResult], asked: int
) -> None:
    galera = Galera({n: 0.002 for n in ROSTER}, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    actions.after_pass(whole(tmp_path))
    galera.now += later_s
    second = whole(tmp_path)
    actions.after_pass(replace(second, probes={**second.probes, **probes}))
    assert sum(sql == CAUSAL_READ[1] for _, sql, _ in galera.log) == asked


def test_a_scheduler_pass_judges_by_the_latency_an_earlier_process_measured(
    tmp_path: Path,
) -> None:
    """A new process every pass: the latency measured by an earlier one is read from the state
    dir, so a 0.3 s cluster is judged by a 1.2 s wait, not the unknown default."""
    galera = Galera(SLOW, frozenset())
    GaleraActions(galera.connect, galera.monotonic).after_pass(whole(tmp_path))
    galera.latency_s, galera.waits = {N2: 1.1, N3: 1.1}, []
    later = GaleraActions(galera.connect, galera.monotonic)
    done = scheduler(later, after(tmp_path, 1.5, budget_s=2.0))
    assert done.evictions == 0 and "normal latency 300 ms" in done.said[0], done
    assert galera.waits == [pytest.approx(1.2)] * 2


def test_a_daemons_eviction_gets_its_stall_wait_off_the_pass(tmp_path: Path) -> None:
    """A daemon's pass with 0.29 s left (its probes waited for the frozen node) cannot give
    the 0.5 s stall wait: the causal reads go on off the pass, on a thread with a deadline of
    their own, and the next pass reports the eviction."""
    galera = Galera({N2: math.inf, N3: math.inf}, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    short = replace(after(tmp_path, 1.5, budget_s=0.29), persistent=True)
    started = actions.after_pass(short)
    assert started.evictions == 0 and "under way" in started.said[0], started
    assert "stall wait 1000 ms, normal latency unknown" in started.said[0]
    job = actions.memory.job
    assert job is not None
    job.join(10.0)
    assert not job.is_alive()
    assert sorted(evicted_on(galera.log), key=str) == [N2, N3]
    assert galera.waits == [1.0, 1.0], "the whole wait, whatever the pass had left"
    reported = actions.after_pass(short)
    assert reported.evictions == reported.unresponsive == 1, reported
    assert reported.said[0].startswith("evicted 127.0.0.1:3311 (gcomm uuid u-1)"), reported
    assert StateStore(tmp_path, Checker.GALERA).evicted("main") == {"u-1": str(N1)}


def test_reads_that_proved_nothing_are_asked_again_by_the_next_pass(tmp_path: Path) -> None:
    """The first reads may answer before the group has anything to wait for: a member still
    silent a pass later is asked about again then, not RETRY_S later."""
    galera = Galera({N2: 0.001, N3: 0.001}, frozenset())
    actions = GaleraActions(galera.connect, galera.monotonic)
    first = scheduler(actions, after(tmp_path, 1.5))
    assert first.evictions == 0 and "the others replicate" in first.said[0]
    galera.latency_s = {N2: math.inf, N3: math.inf}
    galera.now += 1.0
    assert scheduler(actions, after(tmp_path, 2.5, now=201.0)).evictions == 1


def test_a_member_already_out_is_asked_again_when_its_silence_reaches_the_time() -> None:
    """A writer moved away on its first silence is out of every hostgroup: its eviction is
    still decided by the pass that finds its silence at the threshold, so that pass is due
    then, not at the next tick of the cadence; past the threshold, nothing more is due."""
    cluster = cluster_settings(retry_down=3, unresponsive_after_ms=1000)
    n2 = [placed(N2, HG.writer), placed(N2, HG.reader), placed(N3, HG.reader)]
    view = view_of(rows_of([*n2, placed(N3, HG.backup_writer)]), cluster)
    probes = {N1: silent(N1), N2: alive(N2), N3: alive(N3)}
    made = functools.partial(
        decide,
        GaleraPolicy(),
        view,
        probes,
        cluster=cluster,
        in_use={},
        interval_s=2.0,
        probe_wait_s=0.09,
    )
    first = made(memory={}, now=100.0)
    assert not first.memory[N1].routable
    assert first.due[N1] == pytest.approx(100.91)
    past = made(memory=first.memory, now=101.0)
    assert N1 not in past.due


def test_the_pass_that_decides_starts_by_the_shortest_wait_for_a_silent_probe(
    tmp_path: Path,
) -> None:
    """A probe of a frozen node on an open connection gives up at the read timeout (here 0.3
    s, the connect timeout 0.5 s): the pass that decides starts 0.3 s before the silence
    reaches the time, so that its wait ends at that moment, not before it."""

    now = [90.0]
    _, _, found = found_silent(tmp_path, SilentWriter(500.0), now, (500, 300))
    assert found.decision.due[N1] == pytest.approx(100.2)


def found_silent(
    tmp_path: Path, prober: Any, now: list[float], timeouts_ms: tuple[int, int] | None = None
) -> tuple[Any, Any, Any]:
    """A writer healthy at 90 s, then silent: the runner, its cluster (unresponsive_after_ms
    1000, retry_down 3) and the pass at 100 s that finds the silence begun at 99.5 s.
    `timeouts_ms`: the monitor's connect and read timeouts, when not the defaults."""
    from checker_core.passes.result import Mode
    from tests.unit.config_cases import galera_runner, galera_settings
    from tests.unit.fakes import MemoryAdmin, ports
    from tests.unit.galera_cases import templates

    settings = galera_settings(tmp_path)
    cluster = replace(settings.clusters[0], unresponsive_after_ms=1000, retry_down=3)
    monitor = settings.monitor
    if timeouts_ms is not None:
        monitor = replace(
            monitor, connect_timeout_ms=timeouts_ms[0], read_timeout_ms=timeouts_ms[1]
        )
    settings = replace(settings, clusters=(cluster,), monitor=monitor)
    admin = MemoryAdmin([*templates(), *steady(N1)])
    runner = galera_runner(
        tmp_path, settings=settings, **ports(admin, prober, clock=lambda: now[0])
    )
    runner.run(Mode.APPLY)
    prober.silent = True
    now[0] = 100.0
    found = runner.run(Mode.APPLY)
    assert found.decision is not None and found.decision.memory[N1].silent_since == 99.5
    return runner, cluster, found
