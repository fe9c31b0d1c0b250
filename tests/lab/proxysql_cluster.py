"""Three lab proxies joined as a ProxySQL Cluster, for the tests of one acting checker.

Each proxy is a ProxySQLLab of its own (a real `proxysql` when one is installed, else the admin
emulator), listing all three in proxysql_servers with the cluster settings of the observed
reference (check every 200 ms, status every 10 checks, sync after 3 differing checks).

A real ProxySQL checks its peers and pulls their rows itself. The emulator does neither, and must
not invent ProxySQL's algorithm, so for emulators this harness plays the peers' checks from the
outside, every 200 ms: it writes what each proxy would have seen of the others into that proxy's
stats_proxysql_servers_checksums / stats_proxysql_servers_metrics (through a lab-only statement),
and copies a peer's rows as the documented pull rule says (a peer whose mysql_servers checksum
has differed for diffs_before_sync checks and whose epoch is newer, or any peer with version > 1
when our own version is still 1); the pulled rows keep the source's version and epoch, as a real
ProxySQL 2.7.2 was seen to keep them. A proxy that is down is not checked: the others keep its
last rows, frozen, as a real ProxySQL does for a dead peer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pymysql

from checker_core.core.leadership import ProxyAddress
from tests.lab.accounts import ADMIN_PASSWORD, ADMIN_USER
from tests.lab.paths import lab_dir
from tests.lab.process import LabError, wait_until
from tests.lab.proxysql import ProxySQLLab, admin_cursor

CHECK_INTERVAL_MS = 200
STATUS_FREQUENCY = 10
DIFFS_BEFORE_SYNC = 3
CLUSTER_VARIABLES = {
    "admin-cluster_check_interval_ms": str(CHECK_INTERVAL_MS),
    "admin-cluster_check_status_frequency": str(STATUS_FREQUENCY),
    "admin-cluster_mysql_servers_diffs_before_sync": str(DIFFS_BEFORE_SYNC),
    "admin-cluster_mysql_servers_save_to_disk": "true",
}
# a real ProxySQL's cluster checks log in with these (they must be admin credentials too)
CLUSTER_USER = "cluster"
CLUSTER_PASSWORD = "cluster-pw"
LAST_CHECK_MS = 300  # what a live peer's last check took, as the reference saw (500-1600 ms)


@dataclass
class _Seen:
    """What proxy P last saw of peer Q."""

    version: int
    epoch: int
    checksum: str
    changed_at: int
    diff_check: int


@dataclass(frozen=True)
class _Snapshot:
    version: int
    epoch: int
    checksum: str
    uptime: int


class ProxyCluster:
    def __init__(self, size: int = 3) -> None:
        self.proxies = [ProxySQLLab(lab_dir() / f"proxysql-peer{i}") for i in range(1, size + 1)]
        self._down: set[int] = set()
        self._seen: dict[tuple[int, int], _Seen] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._addresses: list[ProxyAddress] = []

    # --- life ----------------------------------------------------------------------------------

    def up(self) -> None:
        for proxy in self.proxies:
            proxy.up()
        # fixed for the cluster's life: a stopped proxy comes back on the same port
        self._addresses = [ProxyAddress(p.admin_host, p.admin_port) for p in self.proxies]
        self.configure()
        if not self.is_real:
            self._thread = threading.Thread(target=self._loop, name="proxy-cluster", daemon=True)
            self._thread.start()

    def down(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for proxy in self.proxies:
            proxy.down()

    @property
    def is_real(self) -> bool:
        return self.proxies[0].is_real

    def address(self, index: int) -> ProxyAddress:
        return self._addresses[index]

    @property
    def addresses(self) -> list[ProxyAddress]:
        return list(self._addresses)

    def uptime(self, index: int) -> int:
        with admin_cursor(self.proxies[index]) as cur:
            cur.execute(
                "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = %s",
                ("ProxySQL_Uptime",),
            )
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def wait_up_for(self, seconds: float, timeout: float = 60.0) -> None:
        """Until every proxy has been running for `seconds` (its checker then counts it settled)."""
        wait_until(
            lambda: all(self.uptime(i) >= seconds for i in range(len(self.proxies))),
            timeout,
            f"every proxy up for {seconds:.0f} s",
            interval=0.5,
        )

    def configure(self) -> None:
        """Every proxy: no servers, all peers listed, the cluster settings; forgets what the
        harness saw, so a test starts from a cluster in agreement."""
        with self._lock:
            self._seen.clear()
            self._down.clear()
            # every proxy emptied before any is listed again: a real ProxySQL syncs
            # proxysql_servers from a peer, and a peer caught between its reset and its new list
            # may hand out an empty one
            for proxy in self.proxies:
                proxy.reset()
            for proxy in self.proxies:
                self._list_peers(proxy)
            wait_until(self._every_proxy_lists_every_peer, 30, "every proxy to list every peer")
        self.wait_next_second()

    def _list_peers(self, proxy: ProxySQLLab) -> None:
        with admin_cursor(proxy) as cur:
            cur.execute("DELETE FROM proxysql_servers")
            for address in self.addresses:
                cur.execute(
                    "INSERT INTO proxysql_servers (hostname, port, weight, comment) "
                    "VALUES (%s, %s, 0, %s)",
                    (address.host, address.port, "lab peer"),
                )
            variables = dict(CLUSTER_VARIABLES)
            if proxy.is_real:
                variables["admin-cluster_username"] = CLUSTER_USER
                variables["admin-cluster_password"] = CLUSTER_PASSWORD
                variables["admin-admin_credentials"] = (
                    f"{ADMIN_USER}:{ADMIN_PASSWORD};{CLUSTER_USER}:{CLUSTER_PASSWORD}"
                )
            for name, value in variables.items():
                cur.execute(
                    "UPDATE global_variables SET variable_value = %s WHERE variable_name = %s",
                    (value, name),
                )
            for command in (
                "LOAD ADMIN VARIABLES TO RUNTIME",
                "SAVE ADMIN VARIABLES TO DISK",
                "LOAD PROXYSQL SERVERS TO RUNTIME",
                "SAVE PROXYSQL SERVERS TO DISK",
            ):
                cur.execute(command)
            if not proxy.is_real:
                cur.execute("LAB STATS DELETE FROM stats_proxysql_servers_checksums")
                cur.execute("LAB STATS DELETE FROM stats_proxysql_servers_metrics")

    def listed_peers(self, index: int) -> set[ProxyAddress]:
        """What runtime_proxysql_servers of that proxy lists."""
        with admin_cursor(self.proxies[index]) as cur:
            cur.execute("SELECT hostname, port FROM runtime_proxysql_servers")
            return {ProxyAddress(str(host), int(port)) for host, port in cur.fetchall()}

    def _every_proxy_lists_every_peer(self) -> bool:
        """True once every proxy lists every peer; a proxy that lost the list (it pulled a
        peer's list from between that peer's reset and its new list) is listed again."""
        wanted = set(self.addresses)
        short = [i for i in range(len(self.proxies)) if self.listed_peers(i) != wanted]
        for index in short:
            self._list_peers(self.proxies[index])
        return not short

    def wait_next_second(self) -> None:
        """Until the clock has left the second of every proxy's last LOAD: ProxySQL's peers pull
        only a newer epoch, and epochs count whole seconds."""
        latest = max(self.epoch(i) for i in range(len(self.proxies)))
        wait_until(lambda: int(time.time()) > latest, 5.0, f"the second after epoch {latest}")

    def load_in_one_second(self, weights: dict[int, int], hostgroup: int) -> None:
        """Each proxy given LOADs its own weight for the servers of `hostgroup`, all within one
        second: no peer's epoch is newer than another's, so none pulls the others' rows and the
        cluster stays split, as ProxySQL 2.7.2 was seen to stay."""
        for _ in range(5):
            self.wait_next_second()
            for index, weight in weights.items():
                with admin_cursor(self.proxies[index]) as cur:
                    cur.execute(
                        "UPDATE mysql_servers SET weight = %s WHERE hostgroup_id = %s",
                        (weight, hostgroup),
                    )
            # from the start of a second, so that every LOAD falls in it
            wait_until(lambda: time.time() % 1 < 0.2, 2.0, "the start of a second", 0.005)
            for index in weights:
                with admin_cursor(self.proxies[index]) as cur:
                    cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            if len({self.epoch(index) for index in weights}) == 1:
                return
        raise LabError(f"proxies {sorted(weights)} did not LOAD within one second in 5 tries")

    def epoch(self, index: int) -> int:
        """runtime_checksums_values' mysql_servers epoch: the second of that proxy's last LOAD."""
        with admin_cursor(self.proxies[index]) as cur:
            cur.execute(
                "SELECT epoch FROM runtime_checksums_values WHERE name = %s", ("mysql_servers",)
            )
            row = cur.fetchone()
        return int(row[0]) if row else 0

    @contextlib.contextmanager
    def stopped(self, index: int) -> Iterator[None]:
        """Proxy `index` down (its port refusing) for the block, then started again on the same
        port from what it saved to disk, with a fresh uptime."""
        with self._lock:
            self._down.add(index)
        try:
            with self.proxies[index].outage():
                yield
        finally:
            with self._lock:
                self._down.discard(index)

    # --- reading ---------------------------------------------------------------------------------

    def version(self, index: int) -> int:
        """runtime_checksums_values' mysql_servers version: one per LOAD on that proxy."""
        with admin_cursor(self.proxies[index]) as cur:
            cur.execute(
                "SELECT version FROM runtime_checksums_values WHERE name = %s", ("mysql_servers",)
            )
            row = cur.fetchone()
        if row is None:
            raise LabError(f"proxy {index}: no mysql_servers checksum")
        return int(row[0])

    # --- the emulated cluster checks -------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(CHECK_INTERVAL_MS / 1000):
            with self._lock, contextlib.suppress(pymysql.MySQLError, OSError, LabError):
                self._round()

    def _snapshot(self, index: int) -> _Snapshot:
        with admin_cursor(self.proxies[index]) as cur:
            cur.execute(
                "SELECT version, epoch, checksum FROM runtime_checksums_values WHERE name = %s",
                ("mysql_servers",),
            )
            version, epoch, checksum = cur.fetchone() or (1, 0, "0x00")
            cur.execute(
                "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = %s",
                ("ProxySQL_Uptime",),
            )
            uptime = cur.fetchone()
        return _Snapshot(int(version), int(epoch), str(checksum), int(uptime[0]) if uptime else 0)

    def _round(self) -> None:
        live = [i for i in range(len(self.proxies)) if i not in self._down]
        snapshots = {i: self._snapshot(i) for i in live}
        now = int(time.time())
        for p in live:
            own = snapshots[p]
            with admin_cursor(self.proxies[p]) as cur:
                for q in live:
                    self._record_check(cur, (p, q), own, snapshots[q], now)
            self._pull(p, own, snapshots)

    def _record_check(
        self,
        cur: pymysql.cursors.Cursor,
        pair: tuple[int, int],
        own: _Snapshot,
        peer: _Snapshot,
        now: int,
    ) -> None:
        """What proxy p's check of peer q wrote into p's stats tables."""
        q = pair[1]
        before = self._seen.get(pair)
        differs = peer.checksum != own.checksum
        changed = before is None or before.checksum != peer.checksum
        seen = _Seen(
            peer.version,
            peer.epoch,
            peer.checksum,
            now if changed else before.changed_at,  # type: ignore[union-attr]
            (before.diff_check + 1 if before is not None else 1) if differs else 0,
        )
        self._seen[pair] = seen
        address = self.address(q)
        cur.execute(
            "LAB STATS INSERT OR REPLACE INTO stats_proxysql_servers_checksums "
            "VALUES (%s, %s, 'mysql_servers', %s, %s, %s, %s, %s, %s)",
            (
                address.host,
                address.port,
                seen.version,
                seen.epoch,
                seen.checksum,
                seen.changed_at,
                now,
                seen.diff_check,
            ),
        )
        cur.execute(
            "LAB STATS INSERT OR REPLACE INTO stats_proxysql_servers_metrics "
            "VALUES (%s, %s, 0, '', 1, %s, %s, 0, 0, 0)",
            (address.host, address.port, peer.uptime, LAST_CHECK_MS),
        )

    def _pull(self, p: int, own: _Snapshot, snapshots: dict[int, _Snapshot]) -> None:
        sources = [
            q
            for q, peer in snapshots.items()
            if q != p
            and peer.checksum != own.checksum
            and peer.version > 1
            and (own.version == 1 or peer.epoch > own.epoch)
            and self._seen[(p, q)].diff_check >= DIFFS_BEFORE_SYNC
        ]
        if not sources:
            return
        source = max(sources, key=lambda q: (snapshots[q].epoch, -q))
        with admin_cursor(self.proxies[source]) as cur:
            cur.execute("SELECT * FROM runtime_mysql_servers")
            rows = list(cur.fetchall())
        with admin_cursor(self.proxies[p]) as cur:
            cur.execute("DELETE FROM mysql_servers")
            if rows:
                marks = ", ".join(["%s"] * len(rows[0]))
                cur.executemany(f"INSERT INTO mysql_servers VALUES ({marks})", rows)
            cur.execute("LOAD MYSQL SERVERS TO RUNTIME")
            pulled = snapshots[source]
            cur.execute(
                "LAB STATS UPDATE runtime_checksums_values SET version = %s, epoch = %s "
                "WHERE name = %s",
                (pulled.version, pulled.epoch, "mysql_servers"),
            )
            cur.execute("SAVE MYSQL SERVERS TO DISK")
