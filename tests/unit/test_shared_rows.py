"""The daemon's one read of every cluster's rows (passes/shared_rows.py): who reads, who waits,
who gets which rows or which failure."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest

from checker_core.core.model import BadRow, Hostgroups, ServerRow
from checker_core.core.settings import Settings
from checker_core.edges.admin_errors import AdminUnreachable
from checker_core.edges.deadline import Deadline, PassTimeout
from checker_core.edges.proxysql import AdminClient
from checker_core.passes.shared_rows import MIN_AGE_S, READ_SHARE, SharedRows
from tests.lab.process import wait_until
from tests.unit.config_cases import galera_settings
from tests.unit.fakes import MemoryAdmin
from tests.unit.galera_cases import N1, N2, cluster_settings

NEVER = -math.inf  # a runner that has written nothing yet
A = Hostgroups(
    writer=10, reader=11, backup_writer=12, offline=13, config_writer=14, config_reader=15
)
B = Hostgroups(
    writer=20, reader=21, backup_writer=22, offline=23, config_writer=24, config_reader=25
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Proxy(MemoryAdmin):
    """ProxySQL's rows, read through `read_packed` alone (the shared read's one question);
    `hold`: a read waits for it; `fail`: the next reads raise it."""

    def __init__(self, rows: Iterable[ServerRow], clock: Clock | None = None) -> None:
        super().__init__(rows)
        self.clock = clock
        self.takes = 0.0  # how long a read takes, on `clock`
        self.asked: list[tuple[int, ...]] = []
        self.hold: threading.Event | None = None
        self.reading = threading.Event()
        self.fail: BaseException | None = None
        self.closed = 0

    def read_packed(self, hostgroups: Iterable[int]) -> str:
        self.asked.append(tuple(sorted(hostgroups)))
        self.reading.set()
        if self.hold is not None:
            self.hold.wait(10)
        if self.fail is not None:
            raise self.fail
        if self.clock is not None:
            self.clock.now += self.takes
        return super().read_packed(hostgroups)

    def close(self) -> None:
        self.closed += 1


def settings_of(tmp_path: Path, *hostgroups: Hostgroups, interval_ms: int = 1000) -> Settings:
    base = galera_settings(tmp_path)
    clusters = tuple(
        replace(cluster_settings(), name=f"c{i}", hostgroups=h) for i, h in enumerate(hostgroups)
    )
    return replace(base, clusters=clusters, run=replace(base.run, interval_ms=interval_ms))


def rows_of(hostgroups: Hostgroups, node: ServerRow | None = None) -> list[ServerRow]:
    rows = [
        ServerRow(hostgroups.writer, N1.host, N1.port),
        ServerRow(hostgroups.reader, N2.host, N2.port),
    ]
    return rows if node is None else [*rows, node]


@pytest.fixture
def clock() -> Clock:
    return Clock()


def source(
    tmp_path: Path, proxy: Proxy, clock: Clock, interval_ms: int = 1000
) -> tuple[SharedRows, list[Proxy]]:
    opened: list[Proxy] = []

    def connect(settings: Settings, deadline: Deadline | None) -> AdminClient:
        opened.append(proxy)
        return proxy

    settings = settings_of(tmp_path, A, B, interval_ms=interval_ms)
    return SharedRows(settings, connect, clock), opened


def deadline(clock: Clock, seconds: float = 5.0) -> Deadline:
    return Deadline(clock.now, clock.now + seconds, 5000, clock)


def test_passes_begun_within_the_age_take_their_rows_from_one_read(
    tmp_path: Path, clock: Clock
) -> None:
    proxy = Proxy([*rows_of(A), *rows_of(B)])
    shared, opened = source(tmp_path, proxy, clock)
    first = shared.rows(A.all, clock.now, NEVER, deadline(clock))
    clock.now += MIN_AGE_S / 2
    second = shared.rows(B.all, clock.now, NEVER, deadline(clock))
    assert shared.reads == 1 and len(opened) == 1
    assert proxy.asked == [tuple(sorted({*A.all, *B.all}))], "every cluster's hostgroups at once"
    assert first is not None and second is not None
    assert {r.hostgroup_id for r in first.runtime} == {A.writer, A.reader}
    assert {r.hostgroup_id for r in second.runtime} == {B.writer, B.reader}
    assert first.staging == first.runtime


def test_a_pass_begun_after_the_age_or_after_its_own_apply_reads_again(
    tmp_path: Path, clock: Clock
) -> None:
    proxy = Proxy(rows_of(A))
    shared, _ = source(tmp_path, proxy, clock)
    kept = shared.rows(A.all, clock.now, NEVER, deadline(clock))
    clock.now += MIN_AGE_S * 2  # a pass begun later than the age allows
    again = shared.rows(A.all, clock.now, NEVER, deadline(clock))
    assert shared.reads == 2
    assert again is kept, "the same answer gives the very same rows"
    applied_at = clock.now + 0.001  # the runner's apply ended after that read began
    clock.now += 0.002
    proxy.staging[(A.offline, N1.host, N1.port)] = ServerRow(A.offline, N1.host, N1.port)
    after_apply = shared.rows(A.all, clock.now, applied_at, deadline(clock))
    assert shared.reads == 3
    assert after_apply is not None and after_apply is not kept
    assert ServerRow(A.offline, N1.host, N1.port) in after_apply.staging


def test_a_pass_waits_for_the_read_under_way_instead_of_reading_again(
    tmp_path: Path, clock: Clock
) -> None:
    proxy = Proxy([*rows_of(A), *rows_of(B)])
    proxy.hold = threading.Event()
    shared, _ = source(tmp_path, proxy, clock)
    got: dict[str, object] = {}
    reader = threading.Thread(
        target=lambda: got.update(a=shared.rows(A.all, clock.now, NEVER, deadline(clock)))
    )
    reader.start()
    assert proxy.reading.wait(5)
    waiter = threading.Thread(
        target=lambda: got.update(b=shared.rows(B.all, clock.now, NEVER, deadline(clock)))
    )
    waiter.start()
    wait_until(lambda: shared.waiting == 1, 5, "the second pass waits")
    proxy.hold.set()
    reader.join(5)
    waiter.join(5)
    assert shared.reads == 1 and len(proxy.asked) == 1
    assert got["a"] is not None and got["b"] is not None


def test_a_bad_row_fails_only_the_cluster_whose_hostgroup_holds_it(
    tmp_path: Path, clock: Clock
) -> None:
    bad = ServerRow(B.reader, "bad host name", 3306)
    proxy = Proxy([*rows_of(A), *rows_of(B, bad)])
    shared, _ = source(tmp_path, proxy, clock)
    rows = shared.rows(A.all, clock.now, NEVER, deadline(clock))
    assert rows is not None and len(rows.runtime) == 2
    with pytest.raises(BadRow, match="bad host name"):
        shared.rows(B.all, clock.now, NEVER, deadline(clock))
    assert shared.reads == 1


def test_proxysqls_failure_is_every_waiting_passs_and_the_connection_is_made_anew(
    tmp_path: Path, clock: Clock
) -> None:
    proxy = Proxy(rows_of(A))
    proxy.fail = AdminUnreachable("admin at 127.0.0.1:6032: connection lost")
    shared, opened = source(tmp_path, proxy, clock)
    with pytest.raises(AdminUnreachable):
        shared.rows(A.all, clock.now, NEVER, deadline(clock))
    with pytest.raises(AdminUnreachable):
        shared.rows(B.all, clock.now, NEVER, deadline(clock))  # the same failed read
    assert shared.reads == 1 and proxy.closed == 1
    proxy.fail = None
    clock.now += MIN_AGE_S * 2
    assert shared.rows(A.all, clock.now, NEVER, deadline(clock)) is not None
    assert len(opened) == 2, "a new connection after the lost one"


def test_a_read_cut_by_its_passs_deadline_leaves_the_others_to_read(
    tmp_path: Path, clock: Clock
) -> None:
    proxy = Proxy([*rows_of(A), *rows_of(B)])
    proxy.fail = PassTimeout("pass cut short")
    shared, _ = source(tmp_path, proxy, clock)
    with pytest.raises(PassTimeout):
        shared.rows(A.all, clock.now, NEVER, deadline(clock))
    proxy.fail = None
    rows = shared.rows(B.all, clock.now, NEVER, deadline(clock))
    assert rows is not None and shared.reads == 1, "the cut read counts for nobody"


def test_a_pass_whose_deadline_comes_while_it_waits_is_cut_short(
    tmp_path: Path, clock: Clock
) -> None:
    proxy = Proxy(rows_of(A))
    proxy.hold = threading.Event()
    shared, _ = source(tmp_path, proxy, clock)
    reader = threading.Thread(target=shared.rows, args=(A.all, clock.now, NEVER, deadline(clock)))
    reader.start()
    assert proxy.reading.wait(5)
    with pytest.raises(PassTimeout, match="waiting for ProxySQL's rows"):
        shared.rows(A.all, clock.now, NEVER, deadline(clock, 0.0))
    proxy.hold.set()
    reader.join(5)


def test_hostgroups_it_does_not_read_and_a_closed_source_leave_the_pass_to_read(
    tmp_path: Path, clock: Clock
) -> None:
    proxy = Proxy(rows_of(A))
    shared, _ = source(tmp_path, proxy, clock)
    other = Hostgroups(30, 31, 32, 33, 34, 35)
    assert shared.rows(other.all, clock.now, NEVER, deadline(clock)) is None
    shared.cover(settings_of(tmp_path, A, other))
    assert shared.rows(other.all, clock.now, NEVER, deadline(clock)) is not None
    shared.close()
    assert shared.rows(A.all, clock.now, NEVER, deadline(clock)) is None
    assert proxy.closed == 1


@pytest.mark.parametrize(
    ("read_ms", "interval_ms", "age_ms"),
    [
        (1, 1000, 1000 * MIN_AGE_S),  # a quick read: the least age
        (20, 1000, 20 * READ_SHARE),  # a slow one: the reads take 1 / READ_SHARE of the time
        (80, 1000, 500),  # slower still: never more than half the interval
        (20, 200, 100),
    ],
)
def test_how_old_a_read_may_be_follows_what_reading_costs(
    tmp_path: Path, clock: Clock, read_ms: float, interval_ms: int, age_ms: float
) -> None:
    proxy = Proxy(rows_of(A), clock)
    proxy.takes = read_ms / 1000
    shared, _ = source(tmp_path, proxy, clock, interval_ms)
    assert shared.max_age_s() == MIN_AGE_S, "nothing read yet"
    began = clock.now
    shared.rows(A.all, began, NEVER, deadline(clock))
    assert shared.max_age_s() == pytest.approx(age_ms / 1000)
    clock.now = began + age_ms / 1000 - 0.001  # a pass begun within the age: no read
    shared.rows(A.all, clock.now, NEVER, deadline(clock))
    assert shared.reads == 1
    clock.now = began + age_ms / 1000 + 0.001  # one begun after it: a read
    shared.rows(A.all, clock.now, NEVER, deadline(clock))
    assert shared.reads == 2
