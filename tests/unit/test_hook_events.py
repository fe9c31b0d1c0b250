"""What a pass tells its hooks: the moves its LOAD made, its evictions, and a change of its
cluster's condition; built from real decisions (the Galera rules)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checker_core.core.events import Condition, EventKind, condition_events
from checker_core.core.leadership import Leadership, ProxyAddress, Role
from checker_core.core.schema import Checker
from checker_core.core.settings import HookSettings
from checker_core.edges import hook_state
from checker_core.edges.memory import StateStore
from checker_core.passes.announce import Announcer
from checker_core.passes.events import Event, condition_of, later_events, pass_events
from checker_core.passes.plugin import EVICTED, ActionsDone
from checker_core.passes.result import Mode, Outcome, PassResult
from tests.unit.config_cases import galera_settings
from tests.unit.daemon_cases import after, failed_pass, galera_pass
from tests.unit.galera_cases import N1, N2, N3, cluster_settings, probe_down, probe_ok, steady


def kinds(events: tuple[Event, ...]) -> list[str]:
    return [e.kind.label for e in events]


def test_the_writer_death_is_a_writer_change_and_the_node_out() -> None:
    died = galera_pass(steady(N1), {N1: probe_down(N1)})
    events = pass_events(died, Condition.SERVING)
    assert kinds(events) == ["writer_changed", "node_out"]
    changed, out = events
    assert changed.fields["writers_before"] == [str(N1)]
    assert changed.fields["writers_after"] == [str(N2)]
    assert "down" in str(changed.fields["reason"])
    assert out.fields["node"] == str(N1) and out.fields["state"] == "down"


def test_the_node_back_is_told_when_the_load_routes_it_again() -> None:
    died = galera_pass(steady(N1), {N1: probe_down(N1)})
    back = galera_pass(after(died), {N1: probe_ok(N1, wsrep_gcomm_uuid="6f83c992-aa21")})
    events = pass_events(back, Condition.SERVING)
    assert kinds(events) == ["node_back"]  # fail_back is off: the writer stays N2
    assert events[0].fields["node"] == str(N1)
    assert events[0].fields["identity"] == "6f83c992-aa21"  # the process now there


@pytest.mark.parametrize(
    ("result", "why"),
    [
        (galera_pass(steady(N1)), "nothing changed"),
        (galera_pass(steady(N1), {N1: probe_down(N1)}, apply=False), "its plan was not loaded"),
        (failed_pass(), "it failed before deciding"),
    ],
)
def test_a_pass_that_loaded_nothing_tells_no_move(result: PassResult, why: str) -> None:
    assert pass_events(result, Condition.SERVING) == (), why


def blind(result: PassResult) -> PassResult:
    return replace(result, outcome=Outcome.BLIND, message="no node answered")


def no_writer() -> PassResult:
    """Every node answers out of the Primary component: none may write, the writer goes."""
    probes = {n: probe_ok(n, wsrep_cluster_status="non-Primary") for n in (N1, N2, N3)}
    return galera_pass(steady(N1), probes)


def test_conditions_of_passes() -> None:
    assert condition_of(galera_pass(steady(N1))) is Condition.SERVING
    assert condition_of(blind(galera_pass(steady(N1)))) is Condition.BLIND
    assert condition_of(no_writer()) is Condition.NO_WRITER
    assert condition_of(failed_pass()) is None
    unloaded = galera_pass(steady(N1), {N1: probe_down(N1)}, apply=False)
    assert condition_of(replace(unloaded, outcome=Outcome.PAUSED)) is None


@pytest.mark.parametrize(
    ("told", "now", "expected"),
    [
        (None, Condition.SERVING, ()),  # nothing told yet, all is well: no news
        (None, Condition.BLIND, (EventKind.BLIND,)),  # a lost record: said again, never not
        (Condition.SERVING, Condition.BLIND, (EventKind.BLIND,)),
        (Condition.BLIND, Condition.BLIND, ()),
        (Condition.BLIND, Condition.NO_WRITER, (EventKind.NO_WRITER,)),
        (Condition.NO_WRITER, Condition.SERVING, (EventKind.RECOVERED,)),
        (Condition.BLIND, Condition.SERVING, (EventKind.RECOVERED,)),
    ],
)
def test_condition_events(
    told: Condition | None, now: Condition, expected: tuple[EventKind, ...]
) -> None:
    assert condition_events(told, now) == expected


@given(st.lists(st.sampled_from(list(Condition)), max_size=30))
def test_each_bad_condition_is_told_once_and_its_end_once(seq: list[Condition]) -> None:
    """Told in order, the conditions give one event per change (none for the first serving
    one), so a team is paged once for a blind cluster and told once that it recovered."""
    told: Condition | None = None
    events: list[EventKind] = []
    for now in seq:
        events.extend(condition_events(told, now))
        told = now
    changes = sum(1 for a, b in itertools.pairwise([None, *seq]) if a is not b)
    first_quiet = bool(seq) and seq[0] is Condition.SERVING
    assert len(events) == changes - first_quiet
    # a recovery follows the bad condition it ends, never another recovery
    for before, event in itertools.pairwise([None, *events]):
        if event is EventKind.RECOVERED:
            assert before in (EventKind.BLIND, EventKind.NO_WRITER)


def test_the_pass_evictions_are_one_event() -> None:
    said = (f"{EVICTED}{N3} (gcomm uuid u3) through {N1}: refused", "probed again")
    result = replace(galera_pass(steady(N1)), evictions=1, node_actions=said)
    events = pass_events(result, Condition.SERVING)
    assert kinds(events) == ["eviction"]
    assert events[0].fields["evicted"] == [said[0]]
    later = later_events("main", ActionsDone(said=said, evictions=1))
    assert kinds(later) == ["eviction"]
    assert later_events("main", ActionsDone(said=("would evict",))) == ()


class Kept:
    def __init__(self) -> None:
        self.documents: list[Mapping[str, object]] = []

    def send(self, documents: Sequence[Mapping[str, object]]) -> None:
        self.documents.extend(documents)


def announcer(tmp_path: Path, hooks: HookSettings | None) -> tuple[Announcer, Kept, StateStore]:
    settings = galera_settings(tmp_path)
    cluster = cluster_settings(hooks=hooks)
    store = StateStore(tmp_path / "state", Checker.GALERA)
    kept = Kept()
    return Announcer(settings, cluster, store, kept, wall=lambda: 1800000000.25), kept, store


HOOKS = HookSettings(command=("/bin/true",))


def test_the_announcer_sends_what_the_hooks_want_with_the_common_fields(tmp_path: Path) -> None:
    talker, kept, _ = announcer(tmp_path, replace(HOOKS, events=frozenset({"writer_changed"})))
    events = talker.after_pass(galera_pass(steady(N1), {N1: probe_down(N1)}))
    assert kinds(events) == ["writer_changed", "node_out"]  # the timeline has both
    (document,) = kept.documents  # the hooks asked for one
    assert document["event"] == "writer_changed" and document["cluster"] == "main"
    assert document["at"] == "2027-01-15T08:00:00.250Z"
    assert document["hostgroups"] == {
        "writer": 100,
        "reader": 101,
        "backup_writer": 102,
        "offline": 9100,
    }
    assert document["checker"] == "galera"


def test_a_blind_cluster_is_told_once_across_processes_and_again_when_the_record_is_lost(
    tmp_path: Path,
) -> None:
    talker, kept, store = announcer(tmp_path, HOOKS)
    talker.after_pass(blind(galera_pass(steady(N1))))
    assert [d["event"] for d in kept.documents] == ["blind"]
    assert hook_state.told(store, "main") == "blind"
    # the next scheduler process goes on from the file: the same condition is no news
    again, kept_again, _ = announcer(tmp_path, HOOKS)
    again.after_pass(blind(galera_pass(steady(N1))))
    assert kept_again.documents == []
    again.after_pass(galera_pass(steady(N1)))
    assert [d["event"] for d in kept_again.documents] == ["recovered"]
    hook_state.told_path(store, "main").unlink()
    lost, kept_lost, _ = announcer(tmp_path, HOOKS)
    lost.after_pass(blind(galera_pass(steady(N1))))
    assert [d["event"] for d in kept_lost.documents] == ["blind"]


@pytest.mark.parametrize("mode", [Mode.DRY_RUN, Mode.STATUS])
def test_a_mode_that_changes_nothing_tells_nothing_and_writes_nothing(
    tmp_path: Path, mode: Mode
) -> None:
    talker, kept, store = announcer(tmp_path, HOOKS)
    assert talker.after_pass(blind(galera_pass(steady(N1))), mode) == ()
    assert kept.documents == [] and not hook_state.told_path(store, "main").exists()


def test_a_standby_tells_nothing_and_writes_nothing(tmp_path: Path) -> None:
    talker, kept, store = announcer(tmp_path, HOOKS)
    me = ProxyAddress("127.0.0.1", 6032)
    peer = ProxyAddress("127.0.0.2", 6032)
    standby = Leadership(Role.STANDBY, peer, (me, peer), "the peer acts", None, None)
    result = replace(
        galera_pass(steady(N1), {N1: probe_down(N1)}, apply=False),
        outcome=Outcome.STANDBY,
        leadership=standby,
    )
    assert talker.after_pass(result) == ()
    assert kept.documents == [] and not hook_state.told_path(store, "main").exists()


def test_without_hooks_nothing_is_written_but_the_timeline_still_gets_events(
    tmp_path: Path,
) -> None:
    talker, kept, store = announcer(tmp_path, None)
    events = talker.after_pass(blind(galera_pass(steady(N1))))
    assert kinds(events) == ["blind"]
    assert kept.documents == [] and not hook_state.told_path(store, "main").exists()


def test_a_paused_cluster_tells_nothing_and_tells_it_after_the_resume(tmp_path: Path) -> None:
    talker, kept, store = announcer(tmp_path, HOOKS)
    store.pause("main", "maintenance")
    assert talker.after_pass(blind(galera_pass(steady(N1)))) == ()
    assert kept.documents == [] and not hook_state.told_path(store, "main").exists()
    store.resume("main")
    talker.after_pass(blind(galera_pass(steady(N1))))
    assert [d["event"] for d in kept.documents] == ["blind"]
