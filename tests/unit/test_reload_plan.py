"""Which clusters' loops a reload keeps, stops and starts: a cluster's own settings, and the
shared settings its runner reads, decide; the log and metrics keys never restart a loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checker_core.core.reload import SHARED_KEYS, plan_reload
from checker_core.core.settings import ClusterSettings, ListenAddress, Secret, Settings
from tests.unit.config_cases import galera_settings
from tests.unit.galera_cases import cluster_settings

A, B, C = (cluster_settings(name=n) for n in ("a", "b", "c"))
Edit = Callable[[Settings], Settings]


def run_edit(**changes: object) -> Edit:
    return lambda s: replace(s, run=replace(s.run, **changes))  # type: ignore[arg-type]


@pytest.fixture
def running(tmp_path: Path) -> Settings:
    return replace(galera_settings(tmp_path), clusters=(A, B))


@pytest.mark.parametrize(
    ("edit", "keep", "stop", "start"),
    [
        (lambda s: s, ("a", "b"), (), ()),
        (lambda s: replace(s, clusters=(A, replace(B, retry_down=2))), ("a",), ("b",), ("b",)),
        (lambda s: replace(s, clusters=(A,)), ("a",), ("b",), ()),
        (lambda s: replace(s, clusters=(A, B, C)), ("a", "b"), (), ("c",)),
        (lambda s: replace(s, clusters=(B, A)), ("b", "a"), (), ()),  # order alone: nothing
        (lambda s: replace(s, clusters=(A, replace(B, name="b2"))), ("a",), ("b",), ("b2",)),
        # read once at start, or by the daemon around the loops: no loop restarts
        (run_edit(log_level="debug"), ("a", "b"), (), ()),
        (run_edit(log_format="json", log_stream="stdout"), ("a", "b"), (), ()),
        (run_edit(metrics_listen=ListenAddress("127.0.0.1", 9141)), ("a", "b"), (), ()),
        (lambda s: replace(s, warnings=("w",), source=Path("/elsewhere.toml")), ("a", "b"), (), ()),
    ],
)
def test_only_the_clusters_whose_settings_changed_restart(
    running: Settings,
    edit: Edit,
    keep: tuple[str, ...],
    stop: tuple[str, ...],
    start: tuple[str, ...],
) -> None:
    plan = plan_reload(running, edit(running))
    assert (plan.keep, plan.stop, plan.start, plan.shared) == (keep, stop, start, ())


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (
            lambda s: replace(s, proxysql=replace(s.proxysql, port=6033)),
            "[proxysql]",
        ),
        (
            lambda s: replace(
                s,
                proxysql=replace(
                    s.proxysql, endpoint=replace(s.proxysql.endpoint, password=Secret("new"))
                ),
            ),
            "[proxysql]",
        ),
        (lambda s: replace(s, monitor=replace(s.monitor, user="other")), "[monitor]"),
        (lambda s: replace(s, node_admin=s.monitor), "[node_admin]"),
        (run_edit(interval_ms=500), "run.interval_ms"),
        (run_edit(max_runtime_ms=400), "run.max_runtime_ms"),
        (run_edit(watch_interval_ms=0), "run.watch_interval_ms"),
        (run_edit(state_dir=Path("/elsewhere")), "run.state_dir"),
        (run_edit(persist=False), "run.persist"),
        (lambda s: replace(s, clusters=(A, B, cluster_settings(name="all"))), "a cluster named"),
    ],
)
def test_a_shared_setting_restarts_every_cluster(running: Settings, edit: Edit, named: str) -> None:
    wanted = edit(running)
    plan = plan_reload(running, wanted)
    assert plan.keep == ()
    assert plan.stop == ("a", "b")
    assert plan.start == tuple(c.name for c in wanted.clusters)
    assert len(plan.shared) == 1 and plan.shared[0].startswith(named)
    assert "every cluster restarted" in plan.describe()


def test_every_shared_key_is_named_once() -> None:
    names = [name for name, _ in SHARED_KEYS]
    assert len(names) == len(set(names))


def test_the_plan_says_what_it_did(running: Settings) -> None:
    wanted = replace(running, clusters=(A, replace(B, retry_up=2), C))
    assert plan_reload(running, wanted).describe() == ("unchanged: a; restarted: b; added: c")
    assert plan_reload(running, replace(running, clusters=(B,))).describe() == (
        "unchanged: b; removed: a"
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings loaded once for the property below (its examples share them)."""
    return galera_settings(tmp_path_factory.mktemp("reload-plan"))


NAMES = ("a", "b", "c", "d")
clusters_of = st.lists(
    st.tuples(st.sampled_from(NAMES), st.integers(0, 2)), unique_by=lambda p: p[0], max_size=4
).map(lambda pairs: tuple(cluster_settings(name=n, retry_down=r) for n, r in pairs))


@given(before=clusters_of, after=clusters_of, shared=st.booleans())
def test_every_cluster_is_kept_or_stopped_and_started(
    base: Settings,
    before: tuple[ClusterSettings, ...],
    after: tuple[ClusterSettings, ...],
    shared: bool,
) -> None:
    running = replace(base, clusters=before)
    wanted = replace(base, clusters=after)
    if shared:
        wanted = replace(wanted, run=replace(wanted.run, interval_ms=wanted.run.interval_ms + 1))
    plan = plan_reload(running, wanted)
    assert set(plan.keep) | set(plan.stop) == {c.name for c in before}
    assert set(plan.keep) | set(plan.start) == {c.name for c in after}
    assert not set(plan.keep) & (set(plan.stop) | set(plan.start))
    kept = {c.name: c for c in before}
    assert all(kept[c.name] == c for c in after if c.name in plan.keep), "kept as it was"
    if shared:
        assert plan.keep == ()
