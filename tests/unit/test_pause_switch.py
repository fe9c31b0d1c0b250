"""The pause switch: the all-clusters file and each cluster's are different files, whatever the
clusters are named (a cluster named `all` once shared the all-clusters file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from checker_core.core.schema import Checker
from checker_core.edges.memory import StateStore


def store(tmp_path: Path, *clusters: str) -> StateStore:
    return StateStore(tmp_path, Checker.GALERA, clusters)


def test_pausing_a_cluster_named_all_pauses_only_that_cluster(tmp_path: Path) -> None:
    switch = store(tmp_path, "all", "main")
    switch.pause("all", "maintenance of the cluster named all")
    assert switch.paused("all") is not None
    assert switch.paused("main") is None
    assert switch.resume(None) is False  # the all-clusters switch was never set
    assert switch.paused("all") is not None


def test_the_all_clusters_switch_pauses_every_cluster_also_one_named_all(tmp_path: Path) -> None:
    switch = store(tmp_path, "all", "main")
    switch.pause(None, "everything")
    assert switch.paused("all") == switch.paused("main") == tmp_path / "galera.paused"
    assert switch.resume("all") is False  # resuming one cluster leaves the global switch on
    assert switch.paused("main") is not None
    assert switch.resume(None) is True
    assert switch.paused("all") is None
    assert switch.paused("main") is None


@pytest.mark.parametrize("name", ["all", "paused", "x.paused", ".", "galera"])
def test_no_cluster_name_makes_the_all_clusters_file(tmp_path: Path, name: str) -> None:
    switch = store(tmp_path, name)
    assert switch.pause_path(name) != switch.pause_path(None)


def test_an_all_clusters_pause_under_its_old_name_still_pauses_and_resumes(
    tmp_path: Path,
) -> None:
    (tmp_path / "galera.all.paused").write_text("set by an older version\n")
    switch = store(tmp_path, "main", "second")
    assert switch.paused("main") == tmp_path / "galera.all.paused"
    assert switch.paused("second") is not None
    assert switch.resume(None) is True
    assert switch.paused("main") is None


def test_the_old_name_belongs_to_a_cluster_named_all_when_there_is_one(tmp_path: Path) -> None:
    (tmp_path / "galera.all.paused").write_text("pause --cluster all\n")
    switch = store(tmp_path, "all", "main")
    assert switch.paused("all") is not None
    assert switch.paused("main") is None
