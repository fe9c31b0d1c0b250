"""The GR hold warning from given settings: the election (suspicion + expel timeout) plus the
new primary's backlog against ProxySQL's mysql-connect_timeout_server_max."""

from __future__ import annotations

from dataclasses import replace

import pytest

from checker_core.core.model import NodeAddress
from checker_core.core.probes import ProbeResult
from checker_core.passes.plugin import AdviceInput
from gr_checker.hold import HoldAdvisor, apply_rates, forecast
from gr_checker.policy import GrFacts
from tests.unit.galera_cases import cluster_settings
from tests.unit.test_gr_policy import M1, M2, M3, healthy_group


def with_group(
    expel: int | None, queues: dict[NodeAddress, int] | None = None, applied: int = 1000
) -> dict[NodeAddress, ProbeResult]:
    probes = healthy_group(M1)
    changed = {}
    for node, probe in probes.items():
        assert isinstance(probe.facts, GrFacts)
        facts = replace(
            probe.facts,
            expel_timeout_s=expel,
            applier_queue=(queues or {}).get(node, 0),
            remote_applied=applied,
        )
        changed[node] = replace(probe, facts=facts)
    return changed


@pytest.mark.parametrize(
    ("expel", "limit_ms", "outlasts"),
    [
        (0, 10000, False),  # 5 s suspicion + 0 + ~1 s: fits
        (5, 10000, True),  # GR's default expel timeout with ProxySQL's default: 11 s > 10 s
        (5, 30000, False),
        (None, 10000, True),  # no member said: GR's default (5 s) is assumed
        (3, 9000, True),
        (3, 9001, False),
    ],
)
def test_the_election_alone_against_the_setting(
    expel: int | None, limit_ms: int, outlasts: bool
) -> None:
    found = forecast(with_group(expel), {}, limit_ms)
    assert found is not None
    assert found.outlasts is outlasts
    text = found.describe()
    assert f"mysql-connect_timeout_server_max ({limit_ms} ms)" in text
    if outlasts:
        assert "can outlast" in text and "SET mysql-connect_timeout_server_max = " in text
        assert "error 9001" in text
    else:
        assert "fits in" in text


def test_a_backlog_at_its_apply_rate_is_added() -> None:
    probes = with_group(0, {M2: 20000, M3: 500})
    found = forecast(probes, {M2: 4000.0}, 10000)  # 5 s of backlog on M2
    assert found is not None and found.backlog is not None
    assert found.backlog.node == M2 and found.backlog.seconds == 5.0
    assert found.outlasts  # 6 s of election + 5 s of backlog
    assert "20000 transaction(s) on 127.0.0.1:3322" in found.describe()


def test_a_backlog_without_a_rate_is_named_not_counted() -> None:
    found = forecast(with_group(0, {M3: 700}), {}, 10000)
    assert found is not None and found.backlog is not None
    assert found.backlog.seconds is None
    assert not found.outlasts
    assert "rate not known yet" in found.describe()


def test_nothing_is_said_without_the_setting_or_an_answer() -> None:
    assert forecast(with_group(0), {}, None) is None
    dead = {n: ProbeResult(n, None, "refused", 1.0) for n in (M1, M2, M3)}
    assert forecast(dead, {}, 10000) is None


def test_rates_come_from_samples_a_second_apart() -> None:
    first, kept = apply_rates({}, with_group(0, applied=1000), now=10.0)
    assert first == {}
    soon, kept_soon = apply_rates(kept, with_group(0, applied=1100), now=10.5)
    assert soon == {} and kept_soon == kept, "half a second: no rate, the old sample kept"
    later, _ = apply_rates(kept, with_group(0, applied=3000), now=12.0)
    assert later[M2] == pytest.approx(1000.0)


def test_the_advisor_speaks_only_for_hold_and_warns_only_when_it_outlasts() -> None:
    advisor = HoldAdvisor()
    variables = {"mysql-connect_timeout_server_max": "10000"}
    held = cluster_settings(brownout="hold")
    [fits] = advisor.advise(AdviceInput(held, with_group(0), variables, 1.0))
    assert not fits.warning
    [warns] = advisor.advise(AdviceInput(held, with_group(5), variables, 2.0))
    assert warns.warning
    routed = cluster_settings(brownout="route")
    assert advisor.advise(AdviceInput(routed, with_group(5), variables, 3.0)) == ()
    assert advisor.proxy_variables(routed) == (), "nothing asked of ProxySQL without a hold"
    assert advisor.proxy_variables(held) == ("mysql-connect_timeout_server_max",)
