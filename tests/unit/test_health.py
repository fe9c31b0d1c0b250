"""/health's rule: healthy while every cluster had a successful pass within 3 intervals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from checker_core.core.leadership import Leadership, ProxyAddress, Role
from checker_core.passes.result import Outcome, PassResult
from checker_core.service.health import ClusterRecord, judge_health

INTERVAL = 2.0
START = 1000.0


def result(outcome: Outcome, cluster: str = "main") -> PassResult:
    return PassResult(cluster, "p", outcome, 3.0, outcome.label)


def history(*passes: tuple[float, Outcome]) -> ClusterRecord | None:
    record: ClusterRecord | None = None
    for at, outcome in passes:
        done = result(outcome)
        record = ClusterRecord.first(done, at) if record is None else record.after(done, at)
    return record


BLIND_TWICE = (
    (START + 1, Outcome.UNCHANGED),
    (START + 2, Outcome.BLIND),
    (START + 3, Outcome.BLIND),
)


@pytest.mark.parametrize(
    ("passes", "now", "healthy"),
    [
        ((), START + 0.1, False),  # nothing has checked the hostgroups yet
        ((), START + 60, False),
        (((START + 1, Outcome.UNCHANGED),), START + 7.0, True),
        (((START + 1, Outcome.CHANGED),), START + 7.1, False),  # the last success is too old
        (((START + 1, Outcome.PAUSED),), START + 2, True),  # paused on purpose is fine
        (((START + 1, Outcome.UNCHANGED), (START + 3, Outcome.FAILED)), START + 6.9, True),
        (((START + 1, Outcome.UNCHANGED), (START + 7, Outcome.FAILED)), START + 7.5, False),
        (((START + 1, Outcome.FAILED),), START + 1.5, False),  # never a success
        (((START + 1, Outcome.UNCHANGED),), START + 1.5, True),
        (((START + 1, Outcome.BAD_INPUT),), START + 6.5, False),
        (((START + 1, Outcome.BUSY),), START + 6.5, False),  # someone else holds the lock
        (((START + 1, Outcome.FAILED), (START + 7, Outcome.UNCHANGED)), START + 8, True),
        # blind passes keep the layout but check nothing: a few are a hiccup, three in a row
        # are a checker that cannot see the cluster, even while its last success is recent
        (BLIND_TWICE, START + 3.5, True),
        ((*BLIND_TWICE, (START + 4, Outcome.BLIND)), START + 4.5, False),
        (
            (*BLIND_TWICE, (START + 4, Outcome.BLIND), (START + 5, Outcome.UNCHANGED)),
            START + 5,
            True,
        ),
        (((START + 1, Outcome.BLIND),), START + 1.5, False),  # never a success
        # a LOAD held by the clocks: the checker is not doing its job, whatever it probes
        (((START + 1, Outcome.UNCHANGED), (START + 3, Outcome.CLOCK_SKEW)), START + 6.9, True),
        (
            ((START + 1, Outcome.UNCHANGED), *((START + t, Outcome.CLOCK_SKEW) for t in (3, 5, 7))),
            START + 7.5,
            False,
        ),
    ],
)
def test_health_rule(passes: tuple[tuple[float, Outcome], ...], now: float, healthy: bool) -> None:
    health = judge_health({"main": history(*passes)}, INTERVAL, START, now)
    assert health.healthy is healthy, health.reason
    assert health.document()["status"] == ("ok" if healthy else "unhealthy")
    assert ("cluster main" in health.reason) is (not healthy)


def test_one_bad_cluster_makes_the_daemon_unhealthy_and_is_named() -> None:
    good = ClusterRecord.first(result(Outcome.UNCHANGED, "a"), START + 10)
    bad = ClusterRecord.first(result(Outcome.FAILED, "b"), START + 10)
    health = judge_health({"a": good, "b": bad}, INTERVAL, START, START + 11)
    assert not health.healthy
    assert "cluster b" in health.reason
    assert "cluster a" not in health.reason
    clusters = health.document()["clusters"]
    assert isinstance(clusters, dict)
    assert clusters["a"]["healthy"] is True
    assert clusters["b"]["last_outcome"] == "failed"


def test_blind_passes_in_a_row_are_named_in_the_reason() -> None:
    record = history(*BLIND_TWICE, (START + 4, Outcome.BLIND))
    health = judge_health({"main": record}, INTERVAL, START, START + 4.1)
    assert not health.healthy
    assert "cluster main: 3 blind passes in a row" in health.reason
    clusters = health.document()["clusters"]
    assert isinstance(clusters, dict)
    assert clusters["main"]["blind_passes_in_a_row"] == 3


def test_a_standby_is_healthy_and_says_its_role() -> None:
    """A standby checks the cluster (it probes and judges) while another proxy's checker acts:
    that is a successful pass, and /health names the role."""
    acting = ProxyAddress("127.0.0.1", 6032)
    standby = Leadership(
        Role.STANDBY, acting, (acting,), "standby: 127.0.0.1:6032 acts", None, None
    )
    done = replace(result(Outcome.STANDBY), leadership=standby)
    health = judge_health(
        {"main": ClusterRecord.first(done, START + 1)}, INTERVAL, START, START + 2
    )
    assert health.healthy, health.reason
    clusters = health.document()["clusters"]
    assert isinstance(clusters, dict)
    assert clusters["main"]["role"] == "standby"
    assert clusters["main"]["last_outcome"] == "standby"
