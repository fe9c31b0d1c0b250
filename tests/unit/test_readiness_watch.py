"""The daemon's readiness watch: worked out again only when its inputs changed, and one warning
when a cluster stops (or starts again) being ready for a failover."""

from __future__ import annotations

from checker_core.service.readiness import ReadinessWatch
from tests.unit.daemon_cases import galera_pass
from tests.unit.galera_cases import N1, N2, N3, probe_ok, steady


def test_a_steady_cluster_is_ready_once_and_warned_about_when_it_stops_being_ready() -> None:
    watch = ReadinessWatch()
    first, said = watch.observe(galera_pass(steady(N1)))
    assert said is None, "ready from the start: nothing to warn about"
    assert first.known_readiness is not None and first.known_readiness.ready
    again, said = watch.observe(galera_pass(steady(N1)))
    assert said is None
    assert again.known_readiness is first.known_readiness, "same inputs: not worked out again"
    read_only = {N2: probe_ok(N2, read_only="ON"), N3: probe_ok(N3, read_only="ON")}
    lost, said = watch.observe(galera_pass(steady(N1), read_only))
    assert said is not None and f"losing {N1} leaves no writer" in said
    assert lost.known_readiness is not None and not lost.known_readiness.ready
    _, said = watch.observe(galera_pass(steady(N1), read_only))
    assert said is None, "one warning per change"
    _, said = watch.observe(galera_pass(steady(N1)))
    assert said is not None and "ready: losing any one node" in said


def test_a_readiness_that_cannot_be_worked_out_never_ends_the_daemon() -> None:
    from dataclasses import replace

    class Broken:
        def assume(self, *args: object) -> None:
            raise RuntimeError("a policy bug")

    result = galera_pass(steady(N1))
    assert result.inputs is not None
    broken = replace(result, inputs=replace(result.inputs, policy=Broken()))
    kept, said = ReadinessWatch().observe(broken)
    assert kept is broken
    assert said is not None and "failover readiness not known (a policy bug)" in said
