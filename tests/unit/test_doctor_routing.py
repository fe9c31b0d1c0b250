"""Where ProxySQL's query rules send a user's writes, as `doctor` works it out: rule order,
flagIN/flagOUT chains, apply, user and schema filters, negated patterns, case, error_msg."""

from __future__ import annotations

import pytest

from checker_core.core.doctor import (
    WRITES,
    FrontendUser,
    QueryRule,
    peer_findings,
    route,
    write_findings,
)
from tests.unit.galera_cases import cluster_settings

APP = FrontendUser("app", 100, "shop")
INSERT, _, _, FOR_UPDATE = WRITES


@pytest.mark.parametrize(
    ("rules", "statement", "hostgroup", "by"),
    [
        ((), INSERT, 100, ()),
        (
            (QueryRule(1, match_digest="^SELECT", destination_hostgroup=101, apply=True),),
            INSERT,
            100,
            (),
        ),
        (
            (QueryRule(1, match_digest="^SELECT", destination_hostgroup=101, apply=True),),
            FOR_UPDATE,
            101,
            (1,),
        ),
        (
            (
                QueryRule(1, match_digest="FOR UPDATE$", destination_hostgroup=100, apply=True),
                QueryRule(2, match_digest="^SELECT", destination_hostgroup=101, apply=True),
            ),
            FOR_UPDATE,
            100,
            (1,),
        ),
        # without apply the walk goes on: the last matching rule's destination wins
        (
            (
                QueryRule(1, match_digest="^insert", destination_hostgroup=101),
                QueryRule(2, match_pattern="INTO t", destination_hostgroup=102),
            ),
            INSERT,
            102,
            (1, 2),
        ),
        # not CASELESS: a lower-case pattern misses
        (
            (QueryRule(1, match_digest="^insert", caseless=False, destination_hostgroup=101),),
            INSERT,
            100,
            (),
        ),
        # another user's rule, another schema's rule
        (
            (QueryRule(1, username="other", match_digest=".", destination_hostgroup=101),),
            INSERT,
            100,
            (),
        ),
        (
            (QueryRule(1, schemaname="shop", match_digest=".", destination_hostgroup=101),),
            INSERT,
            101,
            (1,),
        ),
        # negated pattern: everything that is not a SELECT
        (
            (
                QueryRule(
                    1, match_pattern="^SELECT", negate_match_pattern=True, destination_hostgroup=101
                ),
            ),
            INSERT,
            101,
            (1,),
        ),
        # a chain: flagOUT 5 leads to the rules of flagIN 5 only
        (
            (
                QueryRule(1, match_digest=".", flag_out=5),
                QueryRule(2, match_digest="^INSERT", destination_hostgroup=103, apply=True),
                QueryRule(
                    3, flag_in=5, match_digest="^INSERT", destination_hostgroup=101, apply=True
                ),
            ),
            INSERT,
            101,
            (1, 3),
        ),
        # a rule matching one digest hash never matches the probe statements
        ((QueryRule(1, digest="0x1234", destination_hostgroup=101),), INSERT, 100, ()),
    ],
)
def test_route(
    rules: tuple[QueryRule, ...], statement: object, hostgroup: int, by: tuple[int, ...]
) -> None:
    routed = route(APP, statement, rules)  # type: ignore[arg-type]
    assert routed.hostgroup == hostgroup
    assert tuple(r.rule_id for r in routed.by) == by


def test_an_error_rule_refuses_the_write() -> None:
    rules = [QueryRule(7, match_digest="^DELETE", error_msg="no deletes here")]
    (finding,) = [
        f for f in write_findings([APP], rules, [cluster_settings()]) if "DELETE" in f.text
    ]
    assert finding.line() == (
        "problem: user app: a DELETE is refused by query rule 7 (match_digest '^DELETE'): "
        "no deletes here; fix: deactivate rule 7 or narrow its match"
    )


def test_a_rule_for_some_clients_says_so() -> None:
    rules = [
        QueryRule(
            3, match_digest="^UPDATE", destination_hostgroup=101, only_for="client_addr 10.0.0.%"
        )
    ]
    (finding,) = write_findings([APP], rules, [cluster_settings()])
    assert "(for clients matching rule 3 (client_addr 10.0.0.%))" in finding.text


@pytest.mark.parametrize(
    ("peers", "said"),
    [
        ([("10.0.0.2:6032", "mysql_servers", "0xAA")], []),  # in step
        ([("10.0.0.2:6032", "mysql_servers", "0x0000000000000000")], []),  # loaded nothing yet
        ([("10.0.0.2:6032", "mysql_servers_v2", "0xBB")], []),  # a module this proxy lacks
        ([("10.0.0.2:6032", "mysql_servers", "0xBB")], ["ProxySQL Cluster peer 10.0.0.2:6032"]),
    ],
)
def test_a_peer_with_other_rows_is_said(peers: list[tuple[str, str, str]], said: list[str]) -> None:
    found = peer_findings({"mysql_servers": "0xAA"}, peers)
    assert [f.subject for f in found] == said
    assert all("checksum 0xBB" in f.text and "0xAA" in f.text for f in found)
