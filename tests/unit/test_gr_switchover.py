"""The Group Replication switchover's decisions: who may take over (table-driven refusals from
given pass results), whom the group would elect for --from, and the dry-run's steps and SQL."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from checker_core.core.decide import decide, view_of
from checker_core.core.model import ClusterRows, NodeAddress, ServerRow, ServerStatus, sort_rows
from checker_core.core.probes import ProbeFailure, ProbeResult
from checker_core.core.roster import LiveLayout
from checker_core.exitcodes import Exit
from checker_core.passes.result import Mode, Outcome, PassResult
from checker_core.passes.runner import PassRunner
from galera_checker.switchover import Refusal as GaleraRefusal
from galera_checker.switchover import next_writer
from gr_checker.policy import GroupReplicationPolicy
from gr_checker.switchover import (
    Candidate,
    Move,
    Refusal,
    Why,
    check,
    elect,
    render,
    statement,
    steps,
    successor,
)
from tests.unit.fakes import MemoryAdmin
from tests.unit.galera_cases import HG, cluster_settings
from tests.unit.galera_cases import NODES as GALERA_NODES
from tests.unit.test_gr_policy import M1, M2, M3, MEMBERS, UUID, facts, healthy_group, steady, view

OUTSIDER = NodeAddress("127.0.0.1", 9)


def result(
    probes: Mapping[NodeAddress, ProbeResult],
    writer_weights: Mapping[NodeAddress, int] | None = None,
    operator_rows: Sequence[ServerRow] = (),
    **cluster: object,
) -> PassResult:
    """A status pass over the lab-like roster (every member with a writer row unless told)."""
    weights = dict.fromkeys(MEMBERS, 100) if writer_weights is None else writer_weights
    rows = [ServerRow(HG.config_writer, n.host, n.port, weight=w) for n, w in weights.items()]
    rows += [ServerRow(HG.config_reader, n.host, n.port, weight=100) for n in MEMBERS]
    runtime = sort_rows([*rows, *steady(), *operator_rows])
    settings = cluster_settings(**cluster)
    decision = decide(
        GroupReplicationPolicy(),
        view_of(ClusterRows(runtime, runtime), settings),
        probes,
        memory={},
        cluster=settings,
        in_use={},
        now=100.0,
    )
    layout = LiveLayout.of(ClusterRows(runtime, runtime), HG)
    return PassResult(
        "lab", "p", Outcome.PLANNED, 1.0, "planned", decision, layout=layout, probes=probes
    )


def stopped(node: NodeAddress) -> ProbeResult:
    return ProbeResult(node, None, "connection refused", 1.0, ProbeFailure.REFUSED)


def group_with(**changed: ProbeResult) -> dict[NodeAddress, ProbeResult]:
    probes = healthy_group()
    by_name = {"m1": M1, "m2": M2, "m3": M3}
    probes.update({by_name[k]: v for k, v in changed.items()})
    return probes


def m3_gone() -> dict[NodeAddress, ProbeResult]:
    """Member 3 expelled: the others see two members; its own probe is refused."""
    members = tuple(m for m in view(M1) if m.member_id != UUID[M3])
    return {M1: facts(M1, members), M2: facts(M2, members), M3: stopped(M3)}


def m2_in_minority() -> dict[NodeAddress, ProbeResult]:
    """Member 2 alone: it sees the others UNREACHABLE; they see it UNREACHABLE."""
    theirs = view(M1, {M2: "UNREACHABLE"})
    mine = view(M1, {M1: "UNREACHABLE", M3: "UNREACHABLE"})
    return {M1: facts(M1, theirs), M2: facts(M2, mine), M3: facts(M3, theirs)}


def recovering_m2() -> dict[NodeAddress, ProbeResult]:
    members = view(M1, {M2: "RECOVERING"})
    return {n: facts(n, members) for n in MEMBERS}


def multi_primary() -> dict[NodeAddress, ProbeResult]:
    members = view(None, multi=True)
    return {n: facts(n, members, sro=False, multi=True) for n in MEMBERS}


def primary_in_brownout() -> dict[NodeAddress, ProbeResult]:
    members = view(M2)
    return {
        M1: facts(M1, members),
        M2: facts(M2, members, sro=True, queue=40),
        M3: facts(M3, members),
    }


@dataclass(frozen=True)
class Case:
    """A pass's probes, the target asked for, and the refusal expected."""

    name: str
    probes: dict[NodeAddress, ProbeResult]
    target: NodeAddress
    why: Why
    words: str
    settings: dict[str, object] = field(default_factory=dict)
    weights: dict[NodeAddress, int] | None = None
    node_admin: bool = True
    operator_rows: tuple[ServerRow, ...] = ()


LAGGING_M2 = group_with(m2=facts(M2, view(M1), queue=50))
REFUSALS = [
    Case("stopped member", m3_gone(), M3, Why.UNHEALTHY, "not an ONLINE SECONDARY"),
    Case("minority", m2_in_minority(), M2, Why.UNHEALTHY, "majority"),
    Case("recovering", recovering_m2(), M2, Why.UNHEALTHY, "MEMBER_STATE=RECOVERING"),
    Case(
        "lagging",
        LAGGING_M2,
        M2,
        Why.LAGGING,
        "lags: applier queue 50",
        {"max_transactions_behind": 10},
    ),
    Case("multi-primary", multi_primary(), M2, Why.MULTI_PRIMARY, "multi-primary"),
    Case("no node_admin", healthy_group(), M2, Why.NO_NODE_ADMIN, "node_admin:", node_admin=False),
    Case("not in roster", healthy_group(), OUTSIDER, Why.NOT_IN_ROSTER, "roster"),
    Case(
        "barred by an operator",
        healthy_group(),
        M2,
        Why.BARRED,
        f"{M2} is barred from writer hostgroup {HG.writer} (an operator's OFFLINE_HARD row)",
        operator_rows=(ServerRow(HG.writer, M2.host, M2.port, status=ServerStatus.OFFLINE_HARD),),
    ),
    Case("election under way", primary_in_brownout(), M3, Why.NO_PRIMARY, "brownout"),
    Case(
        "nobody answered",
        {n: stopped(n) for n in MEMBERS},
        M2,
        Why.NOT_JUDGED,
        "could not be judged",
    ),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c.name for c in REFUSALS])
def test_refusals(case: Case) -> None:
    found = check(
        result(case.probes, case.weights, case.operator_rows, **case.settings),
        case.target,
        node_admin=case.node_admin,
    )
    assert isinstance(found, Refusal), found
    assert found.why is case.why
    assert case.words in found.reason


def test_a_healthy_secondary_may_take_over() -> None:
    found = check(result(healthy_group()), M2, node_admin=True)
    assert found == Move(M1, M2, UUID[M2])
    # a backlog under no limit (max_transactions_behind = 0) is no refusal: the hold covers it
    backlog = group_with(m2=facts(M2, view(M1), queue=500))
    assert isinstance(check(result(backlog), M2, node_admin=True), Move)


def test_a_secondary_without_a_writer_row_may_take_over_as_the_group_would_elect_it() -> None:
    """After `adopt` only the primary has a writer row; the checker routes writes to whichever
    member the group elects, so the switchover accepts what an election would be followed to,
    and --from lists every fit secondary; a barred one is left out."""
    adopted = result(healthy_group(), {M1: 100})
    assert check(adopted, M2, node_admin=True) == Move(M1, M2, UUID[M2])
    assert successor(adopted, M1, node_admin=True) == [M2, M3]
    hard = ServerRow(HG.writer, M3.host, M3.port, status=ServerStatus.OFFLINE_HARD)
    barred_m3 = result(healthy_group(), {M1: 100}, [hard])
    assert successor(barred_m3, M1, node_admin=True) == [M2]


def test_the_primary_itself_is_nothing_to_do() -> None:
    assert check(result(healthy_group()), M1, node_admin=True) == M1


def test_from_lists_the_fit_members_and_refuses_another_than_the_primary() -> None:
    assert successor(result(m3_gone()), M1, node_admin=True) == [M2]
    refused = successor(result(healthy_group()), M2, node_admin=True)
    assert isinstance(refused, Refusal)
    assert refused.reason == f"{M2} is not the primary; the primary is {M1}"
    alone = {M1: facts(M1, view(M1)), M2: stopped(M2), M3: stopped(M3)}
    none = successor(result(alone), M1, node_admin=True)
    assert isinstance(none, Refusal)


@pytest.mark.parametrize(
    ("candidates", "elected"),
    [
        # the highest member weight wins
        ([Candidate(M2, "b", 40, "9.7.4"), Candidate(M3, "c", 50, "9.7.4")], M3),
        # equal weights: the lowest server_uuid
        ([Candidate(M2, "b", 50, "9.7.4"), Candidate(M3, "a", 50, "9.7.4")], M3),
        # the lowest version before any weight
        ([Candidate(M2, "b", 10, "8.4.2"), Candidate(M3, "a", 90, "9.7.4")], M2),
        ([Candidate(M2, "b", 10, "8.0.40"), Candidate(M3, "a", 90, "8.0.9")], M3),
    ],
)
def test_election_order(candidates: list[Candidate], elected: NodeAddress) -> None:
    assert elect(candidates).node == elected


def test_statement_and_dry_run_steps() -> None:
    move = Move(M1, M2, "968f12a4-e811-11f1-9bc1-02fc00000001")
    assert statement(move, None) == (
        "SELECT group_replication_set_as_primary(%s)",
        ("968f12a4-e811-11f1-9bc1-02fc00000001",),
    )
    sql, params = statement(move, 30)
    assert render(sql, params) == (
        "SELECT group_replication_set_as_primary('968f12a4-e811-11f1-9bc1-02fc00000001', 30);"
    )
    lines = steps(
        "lab",
        move,
        user="nodeadmin",
        writer_hostgroup=100,
        brownout="hold",
        running_transactions_timeout_s=None,
        timeout_s=60,
    )
    assert lines[0] == (
        f"cluster lab: switchover from {M1} to {M2} "
        "(server_uuid 968f12a4-e811-11f1-9bc1-02fc00000001)"
    )
    assert lines[1] == (
        f"  1. on {M2} as node_admin nodeadmin: "
        "SELECT group_replication_set_as_primary('968f12a4-e811-11f1-9bc1-02fc00000001');"
    )
    assert "without limit" in lines[2]
    assert "hostgroup 100 is left empty" in lines[3]
    assert (
        lines[4]
        == f"  3. done when hostgroup 100 holds {M2} ONLINE alone, or after 60 s (--timeout)"
    )
    routed = steps(
        "lab",
        move,
        user="nodeadmin",
        writer_hostgroup=100,
        brownout="route",
        running_transactions_timeout_s=5,
        timeout_s=60,
    )
    assert "waits up to 5 s" in routed[2]
    assert "brownout = route" in routed[3]


def test_render_quotes_a_quote() -> None:
    assert render("SELECT %s", ("a'b\\c",)) == "SELECT 'a''b\\\\c';"


def test_galera_from_names_the_next_writer_as_a_failover_would() -> None:
    from tests.unit.daemon_cases import galera_pass
    from tests.unit.galera_cases import N1, N2, N3, probe_ok
    from tests.unit.galera_cases import steady as galera_steady

    now = galera_pass(galera_steady())
    assert next_writer(now, N1) == N2  # the next weight, as a failover would choose
    refused = next_writer(now, N2)
    assert isinstance(refused, GaleraRefusal)
    assert refused.reason == f"{N2} is not the writer; the writer is {N1}"
    desynced = galera_pass(
        galera_steady(), {N2: probe_ok(N2, wsrep_local_state="2", wsrep_desync="ON")}
    )
    assert next_writer(desynced, N1) == N3


def test_single_primary_ignores_weights_so_nothing_is_pinned() -> None:
    """A heavier writer weight with fail_back does not take the writer from the primary."""
    heavier = result(group_with(), {M1: 1, M2: 1000, M3: 1}, fail_back=True)
    assert heavier.writers == (M1,)
    after = result(
        {n: facts(n, view(M2)) for n in MEMBERS}, {M1: 1000, M2: 1, M3: 1}, fail_back=True
    )
    assert after.writers == (M2,)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--to=127.0.0.1:3322", "--timeout=0"], "--timeout: 0 is not a number of seconds"),
        (
            ["--to=127.0.0.1:3322", "--running-transactions-timeout=4000"],
            "--running-transactions-timeout: 4000 is not between 0 and 3600",
        ),
        (
            ["--to=127.0.0.1:3322", "--running-transactions-timeout=60"],
            "must be shorter than --timeout (60 s)",
        ),
        (["--to=127.0.0.1:3322", "--from=127.0.0.1:3321"], "give either --to"),
        (["--release"], "--release: a Group Replication switchover pins nothing"),
        (["--to=127.0.0.1:3322"], "node_admin: no [node_admin] account is configured"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], line: str) -> None:
    """Refused before anything is reached (the admin port here answers nothing)."""
    from click.testing import CliRunner

    from gr_checker.cli import build

    (tmp_path / "pw").write_text("pw\n")
    config = tmp_path / "c.toml"
    config.write_text(
        "[proxysql]\nhost = '127.0.0.1'\nport = 9\nuser = 'admin'\n"
        f"password_file = '{tmp_path / 'pw'}'\n"
        f"[monitor]\nuser = 'monitor'\npassword_file = '{tmp_path / 'pw'}'\n"
        f"[run]\nstate_dir = '{tmp_path / 'state'}'\n"
        "[[cluster]]\nname = 'lab'\nwriter_hostgroup = 100\nreader_hostgroup = 101\n"
        "backup_writer_hostgroup = 102\noffline_hostgroup = 9100\n"
    )
    config.chmod(0o600)
    (tmp_path / "pw").chmod(0o600)
    done = CliRunner().invoke(build(), [f"--config={config}", "switchover", *args])
    assert done.exit_code == 2, done.output
    assert line in done.output
    assert len(done.output.strip().splitlines()) == 1
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").iterdir())


# ------------------------------------------- a command's "done" is the pass's own rule


class LeavingAdmin(MemoryAdmin):
    """ProxySQL after the move: what a LOAD removed is kept OFFLINE_HARD in runtime, not staged,
    while clients still hold connections to it."""

    def __init__(self, staged: Sequence[ServerRow], leaving: Sequence[ServerRow]) -> None:
        super().__init__(staged)
        self.runtime.update((r.key, r) for r in leaving)
        self.held = {(r.hostgroup_id, r.node): 3 for r in leaving}

    def connections_in_use(self, hostgroups: Iterable[int]) -> dict[tuple[int, NodeAddress], int]:
        wanted = set(hostgroups)
        return {k: n for k, n in self.held.items() if k[0] in wanted}


class DaemonsPasses:
    """The runner `_follow` is given, while a daemon holds the lock and makes every pass (each of
    ours is BUSY); its clock jumps a second a pass, so a move never done ends at --timeout."""

    def __init__(self, admin: MemoryAdmin) -> None:
        self._admin = admin
        self.settings = SimpleNamespace(run=SimpleNamespace(interval_ms=1))
        self.clock = 0.0

    def monotonic(self) -> float:
        self.clock += 1.0
        return self.clock

    def run(self, mode: Mode, *, pin: object = None) -> PassResult:
        return PassResult("lab", "p", Outcome.BUSY, 0.0, "busy")

    def admin(self) -> MemoryAdmin:
        return self._admin


class Returned:
    """group_replication_set_as_primary that has already answered."""

    answer = "Primary server switched to: uuid-2"
    error = None

    def __init__(self) -> None:
        self.finished = threading.Event()

    def start(self) -> None:
        self.finished.set()


def _hard(node: NodeAddress, hostgroup: int = HG.writer) -> ServerRow:
    return ServerRow(hostgroup, node.host, node.port, status=ServerStatus.OFFLINE_HARD)


def _in_writer(node: NodeAddress, status: ServerStatus = ServerStatus.ONLINE) -> ServerRow:
    return ServerRow(HG.writer, node.host, node.port, status=status)


@dataclass(frozen=True)
class Done:
    name: str
    staged: tuple[ServerRow, ...]  # loaded: in runtime as in mysql_servers
    leaving: tuple[ServerRow, ...]  # in runtime only
    done: bool


DONE = [
    Done("target alone", (_in_writer(M2),), (), True),
    Done(
        "the old primary leaving while clients hold it",
        (_in_writer(M2),),
        (_hard(M1),),
        True,
    ),
    Done("the target shunned by ProxySQL", (_in_writer(M2, ServerStatus.SHUNNED),), (), True),
    Done("an operator's OFFLINE_HARD row", (_in_writer(M2), _hard(M3)), (), True),
    Done("two writers", (_in_writer(M1), _in_writer(M2)), (), False),
    Done(
        "the old primary draining",
        (_in_writer(M1, ServerStatus.OFFLINE_SOFT), _in_writer(M2)),
        (),
        False,
    ),
    Done("the old primary only", (_in_writer(M1),), (), False),
    Done("the target leaving", (_in_writer(M1),), (_hard(M2),), False),
    Done("empty", (), (), False),
]


@pytest.mark.parametrize("case", DONE, ids=[c.name for c in DONE])
def test_the_switchover_is_done_by_the_pass_own_rule(case: Done) -> None:
    """Done when the writer hostgroup routes to the target alone, as a pass reads it: a row
    ProxySQL keeps OFFLINE_HARD in runtime only (a removed server clients still hold) or an
    operator's OFFLINE_HARD row routes nothing; SHUNNED is an ONLINE row; a draining or a
    second ONLINE writer is not done."""
    from gr_checker import set_primary

    admin = LeavingAdmin(case.staged, case.leaving)
    said: list[str] = []
    move = Move(M1, M2, UUID[M2])
    code = set_primary._follow(
        cast(PassRunner, DaemonsPasses(admin)),
        cluster=cluster_settings(),
        move=move,
        call=cast(set_primary.Call, Returned()),
        timeout_s=2.0,
        say=said.append,
    )
    assert (code is Exit.OK) == case.done, said
    assert (said[-1] == f"cluster main: switchover to {M2} done") == case.done, said
    assert not admin.writes()


def _galera_result(live: list[ServerRow], target: NodeAddress) -> PassResult:
    """The pass that settles a Galera cluster with `target` pinned, once its plan is loaded."""
    from tests.unit.galera_cases import apply_plan, rows_of
    from tests.unit.galera_cases import run as galera_run

    settled = live
    for _ in range(5):
        decision = galera_run(settled, preferred_writer=target, drained=GALERA_NODES)
        if not decision.plan.changes:
            break
        settled = apply_plan(settled, decision)
    assert not decision.plan.changes, decision.plan.changes
    layout = LiveLayout.of(rows_of(settled), HG)
    return PassResult("lab", "p", Outcome.UNCHANGED, 1.0, "unchanged", decision, layout=layout)


def test_a_galera_move_is_done_beside_an_operator_offline_hard_writer_row() -> None:
    """An operator's OFFLINE_HARD row in the writer hostgroup (a node barred from writing) is
    kept in every plan; it routes nothing, so the move to the pinned writer is done."""
    from tests.unit.galera_cases import N1, N2, N3, placed
    from tests.unit.galera_cases import steady as galera_steady

    barred = placed(N3, HG.writer, ServerStatus.OFFLINE_HARD)
    moved = _galera_result([*galera_steady(N2), barred], N2)
    assert moved.routed_writers == (N2,)
    assert moved.moved_to(N2)
    assert not moved.moved_to(N1)
    assert _galera_result(galera_steady(N2), N2).moved_to(N2)
