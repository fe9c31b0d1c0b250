"""The checker's own failure paths, through its public commands against the lab: one cluster's
bad rows never stop another's passes (nor the daemon), a state dir that refuses its files never
hides a failover, a reader whose state asks for a drain drains, and a GR member the majority
sees UNREACHABLE leaves at once whatever the checker's own probe of it did."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from checker_core.core.model import NodeAddress, ServerRow, ServerStatus
from tests.integration.rig import HG, Daemon, PassRun, Rig
from tests.lab.process import free_port, wait_until

# a second cluster beside the lab's: its own hostgroups, one node nothing listens on
SPARE = {"writer": 300, "reader": 301, "backup": 302, "offline": 9300}
SPARE_TEMPLATE = 8300


def with_spare_cluster(rig: Rig) -> NodeAddress:
    """Add cluster `spare` to the rig's config, its roster one silent node."""
    node = NodeAddress("127.0.0.1", free_port())
    rig.admin.stage(
        [SPARE_TEMPLATE, SPARE_TEMPLATE + 1],
        [
            ServerRow(SPARE_TEMPLATE, node.host, node.port),
            ServerRow(SPARE_TEMPLATE + 1, node.host, node.port),
        ],
    )
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    with rig.config.open("a") as config:
        config.write(
            "[[cluster]]\n"
            'name = "spare"\n'
            f"writer_hostgroup = {SPARE['writer']}\n"
            f"reader_hostgroup = {SPARE['reader']}\n"
            f"backup_writer_hostgroup = {SPARE['backup']}\n"
            f"offline_hostgroup = {SPARE['offline']}\n"
        )
    return node


BAD_HOST = "bad host"


def spoil_spare(rig: Rig, node: NodeAddress) -> None:
    """A malformed template row of `spare`, staged: ProxySQL takes any text as a hostname."""
    rig.admin.execute(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (%s, %s, %s)",
        (SPARE_TEMPLATE, BAD_HOST, node.port),
    )


def passes_of(result: PassRun) -> dict[str, dict[str, Any]]:
    return {p["cluster"]: p for p in result.logs if p.get("event") == "pass"}


@pytest.fixture
def cleanup_spare(rig: Rig) -> Iterator[None]:
    yield
    spare = [*SPARE.values(), SPARE_TEMPLATE, SPARE_TEMPLATE + 1]
    marks = ", ".join(["%s"] * len(spare))
    # raw SQL: the rows may be malformed, which the checker's own reader refuses
    rig.admin.execute(f"DELETE FROM mysql_servers WHERE hostgroup_id IN ({marks})", spare)
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")


@pytest.mark.galera
@pytest.mark.proxysql
@pytest.mark.usefixtures("cleanup_spare")
def test_one_clusters_bad_row_fails_only_its_own_pass(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    spare = with_spare_cluster(rig)
    rig.passes(1)
    spoil_spare(rig, spare)
    galera.kill(1)
    result = rig.run()
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    passes = passes_of(result)
    assert passes["spare"]["outcome"] == "bad_input"
    assert f"hostname {BAD_HOST!r} is not a host name" in passes["spare"]["summary"]
    assert passes["lab"]["outcome"] == "changed"
    assert f"writer {n2} (was {n1})" in passes["lab"]["summary"]
    assert rig.writers == {n2}


@pytest.mark.galera
@pytest.mark.proxysql
@pytest.mark.usefixtures("cleanup_spare")
def test_the_daemon_keeps_failing_over_when_another_cluster_turns_bad(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.run_settings.update(interval_ms=500, max_runtime_ms=450)
    rig.write_config()
    spare = with_spare_cluster(rig)
    daemon = Daemon(rig)
    try:
        wait_until(lambda: daemon.next_pass()["cluster"] == "lab", 30, "a pass of lab")
        spoil_spare(rig, spare)
        wait_until(lambda: daemon.next_pass()["outcome"] == "bad_input", 30, "spare's pass refused")
        galera.kill(1)

        def failed_over() -> bool:
            found = daemon.next_pass()
            return bool(found["cluster"] == "lab" and found["writers"] == [str(n2)])

        wait_until(failed_over, 30, "lab's writer to move to node 2")
        assert daemon.proc.poll() is None, "the daemon is still running"
    finally:
        code = daemon.stop()
    assert code == 0
    assert rig.writers == {n2}
    assert n1 not in rig.readers


@pytest.mark.galera
@pytest.mark.proxysql
def test_a_state_file_that_cannot_be_written_never_hides_a_failover(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n1, n2, _ = nodes
    rig.passes(1)
    state_file = rig.state_dir / "galera.lab.state.json"
    state_file.unlink()
    state_file.mkdir()  # a directory where the file should be
    galera.kill(1)
    result = rig.run()
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert f"writer {n2} (was {n1})" in result.summary
    warned = [str(line.get("reason")) for line in result.logs if line.get("event") == "state"]
    assert any("not saved" in reason for reason in warned), result.stderr
    assert rig.writers == {n2}


@pytest.mark.galera
@pytest.mark.proxysql
@pytest.mark.parametrize("command", ["pause", "resume"])
def test_pause_and_resume_refuse_a_state_dir_they_cannot_use(rig: Rig, command: str) -> None:
    # the configuration itself is refused when the state dir lies under a regular file
    blocker = rig.tmp / "not-a-dir"
    blocker.write_text("a regular file\n")
    rig.run_settings.update(state_dir=str(blocker / "state"))
    rig.write_config()
    refused = rig.run(command)
    assert refused.code == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert f"run.state_dir: {blocker / 'state'}" in refused.stderr
    # a state dir that is fine on paper, where the pause file cannot be written or removed
    state = rig.tmp / "state-ok"
    (state / "galera.paused").mkdir(parents=True)
    rig.run_settings.update(state_dir=str(state))
    rig.write_config()
    result = rig.run(command)
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"run.state_dir {state}" in line
    assert "nothing changed" in line


@pytest.mark.galera
@pytest.mark.proxysql
def test_a_desynced_reader_drains_before_it_leaves(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    n3 = nodes[2]
    rig.passes(1)
    galera.desync(3, True)
    first = rig.passes(1)[0]
    assert rig.in_hostgroup(HG.reader).get(n3) is ServerStatus.OFFLINE_SOFT, first.summary
    assert rig.in_hostgroup(HG.backup_writer).get(n3) is ServerStatus.OFFLINE_SOFT
    rig.passes(1)  # no client holds it: done draining
    assert n3 not in rig.in_hostgroup(HG.reader)
    assert n3 not in rig.in_hostgroup(HG.backup_writer)
    assert n3 in rig.offline
    galera.desync(3, False)
    rig.passes(1)
    assert n3 in rig.readers


@pytest.mark.gr
@pytest.mark.proxysql
def test_a_member_the_majority_sees_unreachable_leaves_at_once(
    gr: Any, gr_rig: tuple[Rig, list[NodeAddress]]
) -> None:
    rig, members = gr_rig
    m3 = members[2]
    rig.write_config(retry_down=5)
    rig.passes(1)
    assert m3 in rig.readers
    gr.freeze(3)
    try:

        def unreachable() -> bool:
            view = gr.member_status(1).view or []
            return any(row.state == "UNREACHABLE" for row in view)

        wait_until(unreachable, 60, "member 1 to see member 3 UNREACHABLE")
        result = rig.passes(1)[0]
    finally:
        gr.thaw(3)
    assert m3 not in rig.readers, result.summary
    assert m3 in rig.offline


@pytest.mark.galera
@pytest.mark.proxysql
def test_adopt_refuses_a_malformed_row_in_one_line(rig: Rig, nodes: list[NodeAddress]) -> None:
    n1 = nodes[0]
    rig.passes(1)
    rig.admin.stage(HG.templates, [])
    rig.admin.execute("LOAD MYSQL SERVERS TO RUNTIME")
    rig.admin.execute(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (%s, %s, %s)",
        (HG.reader, BAD_HOST, n1.port),
    )
    before = rig.admin.execute("SELECT * FROM mysql_servers ORDER BY hostgroup_id, port")
    result = rig.run("adopt")
    assert result.code == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"row ({HG.reader}, {BAD_HOST}, {n1.port}): hostname {BAD_HOST!r}" in line
    assert rig.admin.execute("SELECT * FROM mysql_servers ORDER BY hostgroup_id, port") == before


@pytest.mark.galera
@pytest.mark.proxysql
def test_a_pause_longer_than_the_drain_does_not_cut_the_drain_short(
    rig: Rig, galera: Any, nodes: list[NodeAddress]
) -> None:
    """The writer is desynced while the checker is paused for longer than drain_timeout_ms, a
    client holding a connection to it: once resumed, the writer drains; it does not leave on the
    next pass as if its drain had begun with the pause."""
    n1 = nodes[0]
    rig.write_config(drain_timeout_ms=4000)
    rig.passes(1)
    with rig.proxysql.hold(HG.writer, n1.host, n1.port):
        assert rig.run("pause").code == 0
        galera.desync(1, True)
        paused_at = time.monotonic()
        wait_until(
            lambda: "paused" in rig.passes(1)[0].summary and time.monotonic() - paused_at > 4.5,
            30,
            "paused passes for longer than drain_timeout_ms",
        )
        assert rig.run("resume").code == 0
        for _ in range(2):  # the drain begins, and goes on while the client is there
            done = rig.passes(1)[0]
            assert rig.in_hostgroup(HG.writer).get(n1) is ServerStatus.OFFLINE_SOFT, done.summary
