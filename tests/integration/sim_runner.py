"""A daemon's pass runner over one simulated Galera cluster of three, seeded into a ProxySQL
(a module's own, or the lab's): for the integration tests that need ProxySQL's real tables but
no real cluster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from checker_core.core.schema import Checker
from checker_core.passes.result import Mode, PassResult
from checker_core.passes.runner import PassRunner
from checker_core.settings.config import load
from galera_checker.cli import kind as galera_kind
from tests.integration.rig import admin_for
from tests.lab.fleet_config import Fleet, seed, write_config
from tests.lab.proxysql import ProxySQLLab
from tests.lab.simnodes import SimNodes


@contextmanager
def sim_runner(lab: ProxySQLLab, directory: Path) -> Iterator[tuple[SimNodes, PassRunner]]:
    """The simulated nodes, their templates seeded into `lab`, and a daemon's runner whose
    configuration and state live under `directory`; closed on the way out."""
    with SimNodes(clusters=1, nodes=3) as sim:
        fleet = Fleet.of(sim)
        admin = admin_for(lab)
        try:
            seed(admin, fleet)
        finally:
            admin.close()
        config = write_config(lab, fleet, directory, 2000)
        made = PassRunner(load(config, Checker.GALERA, env={}), galera_kind(), persistent=True)
        try:
            yield sim, made
        finally:
            made.close()


@contextmanager
def reset_sim_runner(lab: ProxySQLLab, directory: Path) -> Iterator[PassRunner]:
    """`sim_runner`'s pass runner on a ProxySQL emptied before and after: a test module's own."""
    lab.reset()
    try:
        with sim_runner(lab, directory) as (_, made):
            yield made
    finally:
        lab.reset()


def one_pass(runner: PassRunner) -> PassResult:
    """One acting pass of the runner's one cluster."""
    result = runner.run(Mode.APPLY)
    return result
