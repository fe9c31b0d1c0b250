"""A daemon's steady pass over simulated Galera nodes and a ProxySQL: the same rows and the same
answers keep the last decision, and the first answer that differs is decided afresh."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from checker_core.passes.result import Mode, Outcome, PassResult
from checker_core.passes.runner import PassRunner
from tests.integration.sim_runner import sim_runner
from tests.lab.proxysql import ProxySQLLab
from tests.lab.simnodes import SimNodes

pytestmark = [pytest.mark.proxysql]


@pytest.fixture
def runner(private_proxysql: ProxySQLLab, tmp_path: Path) -> Iterator[tuple[SimNodes, PassRunner]]:
    private_proxysql.reset()
    with sim_runner(private_proxysql, tmp_path / "checker") as made:
        yield made


def one_pass(runner: PassRunner) -> PassResult:
    result = runner.run(Mode.APPLY)
    return result


def test_a_steady_pass_keeps_its_decision_until_an_answer_differs(
    runner: tuple[SimNodes, PassRunner],
) -> None:
    sim, checker = runner
    for _ in range(20):  # until the layout is placed and the counters settled
        if one_pass(checker).outcome is Outcome.UNCHANGED:
            break
    first, second, third = one_pass(checker), one_pass(checker), one_pass(checker)
    assert first.outcome is second.outcome is third.outcome is Outcome.UNCHANGED
    assert second.decision is first.decision and third.decision is first.decision
    (writer,) = first.writers
    sim.set_variables(f"{writer.host}:{writer.port}", wsrep_reject_queries="ALL")
    try:
        moved = one_pass(checker)
    finally:
        sim.reset(f"{writer.host}:{writer.port}")
    assert moved.decision is not first.decision
    assert moved.outcome is Outcome.CHANGED
    assert writer not in moved.writers, "a writer that rejects queries is no writer"


def test_queues_that_move_keep_the_decision_and_show_as_read(
    runner: tuple[SimNodes, PassRunner],
) -> None:
    """Every answer differs from the last in its receive queue: the plan is the one made
    before, and each pass's verdicts hold the queues it read."""
    sim, checker = runner
    for _ in range(20):
        if one_pass(checker).outcome is Outcome.UNCHANGED:
            break
    settled = one_pass(checker)
    for node in sim.addresses:
        sim.changing(node, True)
    seen: set[int | None] = set()
    for _ in range(4):
        moving = one_pass(checker)
        assert moving.outcome is Outcome.UNCHANGED
        assert moving.decision is not None and settled.decision is not None
        assert moving.decision.plan is settled.decision.plan, "nothing decided again"
        seen |= {v.queue for v in moving.decision.raw.values()}
    assert len(seen) > 1, "the queues read moved from pass to pass"
