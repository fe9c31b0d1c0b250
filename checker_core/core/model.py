"""Immutable records shared by both checkers: ProxySQL rows, hostgroup sets, plans."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace

from checker_core.core.hostname import host_problem, port_problem


class ServerStatus(enum.Enum):
    """A mysql_servers status, as ProxySQL spells it."""

    ONLINE = "ONLINE"
    SHUNNED = "SHUNNED"
    OFFLINE_SOFT = "OFFLINE_SOFT"
    OFFLINE_HARD = "OFFLINE_HARD"


@dataclass(frozen=True, slots=True, order=True)
class NodeAddress:
    """One backend, as ProxySQL names it: hostname and port."""

    host: str
    port: int
    # its hash, made on first use: a node keys most of a pass's maps, and the hash a frozen
    # dataclass makes builds a tuple on every lookup
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        found = self._hash
        if not found:
            found = hash((self.host, self.port))
            object.__setattr__(self, "_hash", found)
        return found

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class BadInput(ValueError):
    """Input the tool will not act on: a row, an argument, a setting it cannot use. The message
    names the row or the key; whoever catches it reports `bad input` and changes nothing."""


class BadRow(BadInput):
    """A mysql_servers row the tool cannot read; the message names the row."""


@dataclass(frozen=True, slots=True)
class ServerRow:
    """One row of mysql_servers / runtime_mysql_servers, with ProxySQL's column defaults."""

    hostgroup_id: int
    hostname: str
    port: int = 3306
    gtid_port: int = 0
    status: ServerStatus = ServerStatus.ONLINE
    weight: int = 1
    compression: int = 0
    max_connections: int = 1000
    max_replication_lag: int = 0
    use_ssl: int = 0
    max_latency_ms: int = 0
    comment: str = ""

    @property
    def key(self) -> tuple[int, str, int]:
        """ProxySQL's primary key of mysql_servers."""
        return (self.hostgroup_id, self.hostname, self.port)

    @property
    def node(self) -> NodeAddress:
        return NodeAddress(self.hostname, self.port)

    def values(self) -> tuple[int | str, ...]:
        """The row's values in COLUMNS order, ready to bind as parameters."""
        return tuple(
            getattr(self, name).value if name == "status" else getattr(self, name)
            for name in COLUMNS
        )

    def as_loaded(self) -> ServerRow:
        """The row as it was loaded: SHUNNED is ProxySQL's own passing state of an ONLINE row
        (its monitor's, never written by anyone)."""
        if self.status is ServerStatus.SHUNNED:
            return replace(self, status=ServerStatus.ONLINE)
        return self

    def moved(
        self, hostgroup_id: int, status: ServerStatus, weight: int | None = None
    ) -> ServerRow:
        """The same server's attributes, placed in another hostgroup with another status."""
        return replace(
            self,
            hostgroup_id=hostgroup_id,
            status=status,
            weight=self.weight if weight is None else weight,
        )

    def describe(self) -> str:
        return f"{self.hostname}:{self.port} in hostgroup {self.hostgroup_id} ({self.status.value})"

    @classmethod
    def from_admin(cls, values: Sequence[object | None], *, any_host: bool = False) -> ServerRow:
        """Build a row from the strings ProxySQL's admin returns, in COLUMNS order.
        `any_host`: the hostname taken as it is (a row of a hostgroup the tool only carries
        through a LOAD, never routes to)."""
        if len(values) != len(COLUMNS):
            raise BadRow(f"expected {len(COLUMNS)} columns, got {len(values)}: {values!r}")
        raw = dict(zip(COLUMNS, values, strict=True))
        where = f"row ({raw['hostgroup_id']}, {raw['hostname']}, {raw['port']})"
        try:
            status = ServerStatus(str(raw["status"]).upper())
        except ValueError:
            raise BadRow(f"{where}: unknown status {raw['status']!r}") from None
        ints: dict[str, int] = {}
        for name in _INT_COLUMNS:
            try:
                ints[name] = int(str(raw[name]))
            except ValueError:
                raise BadRow(f"{where}: {name} is not a number: {raw[name]!r}") from None
        hostname = str(raw["hostname"] or "")
        if not hostname and not any_host:
            raise BadRow(f"{where}: empty hostname")
        problem = None if any_host else host_problem(hostname, socket_port=ints["port"])
        if problem is not None:
            raise BadRow(f"{where}: hostname {problem}")
        problem = port_problem(hostname, ints["port"])
        if problem is not None:
            raise BadRow(f"{where}: {problem}")
        return cls(
            hostname=hostname,
            status=status,
            comment="" if raw["comment"] is None else str(raw["comment"]),
            **ints,
        )


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ServerRow))
_INT_COLUMNS = tuple(n for n in COLUMNS if n not in ("hostname", "status", "comment"))


@dataclass(frozen=True, slots=True)
class Hostgroups:
    """The hostgroup set of one cluster, with the template hostgroups that hold its roster."""

    writer: int
    reader: int
    backup_writer: int
    offline: int
    config_writer: int
    config_reader: int

    @property
    def managed(self) -> tuple[int, int, int, int]:
        """The hostgroups whose rows the tool rewrites every pass."""
        return (self.writer, self.reader, self.backup_writer, self.offline)

    @property
    def templates(self) -> tuple[int, int]:
        return (self.config_writer, self.config_reader)

    @property
    def all(self) -> tuple[int, ...]:
        return self.managed + self.templates


@dataclass(frozen=True, slots=True)
class ClusterRows:
    """What ProxySQL holds for one hostgroup set: the live rows and the staging rows."""

    runtime: tuple[ServerRow, ...]
    staging: tuple[ServerRow, ...]

    def live(self, hostgroups: Iterable[int]) -> tuple[ServerRow, ...]:
        wanted = set(hostgroups)
        return tuple(r for r in self.runtime if r.hostgroup_id in wanted)

    def staged(self, hostgroups: Iterable[int]) -> tuple[ServerRow, ...]:
        wanted = set(hostgroups)
        return tuple(r for r in self.staging if r.hostgroup_id in wanted)


class ChangeKind(enum.Enum):
    ADD = "add"
    REMOVE = "remove"
    UPDATE = "update"


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between the live rows and the wanted rows, with the reason for it."""

    kind: ChangeKind
    before: ServerRow | None
    after: ServerRow | None
    reason: str

    def describe(self) -> str:
        if self.kind is ChangeKind.ADD and self.after is not None:
            return f"add {self.after.describe()}: {self.reason}"
        if self.kind is ChangeKind.REMOVE and self.before is not None:
            return f"remove {self.before.describe()}: {self.reason}"
        assert self.before is not None and self.after is not None
        after = f"{self.after.status.value} weight {self.after.weight}"
        return f"update {self.before.describe()} -> {after}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Plan:
    """The complete wanted rows of a cluster's managed hostgroups and how they differ from live.

    `desired` is what the staging area must hold before a LOAD; `changes` are the live
    differences. An empty `changes` means nothing is loaded.
    """

    hostgroups: Hostgroups
    desired: tuple[ServerRow, ...]
    changes: tuple[Change, ...] = field(default=())
    adopted: tuple[ServerRow, ...] = field(default=())  # template rows to create (roster adoption)
    # what the template hostgroups' staging must hold when the LOAD goes out: the rows this pass
    # read there (or adopted). Anything else was written by someone else during the pass
    templates: tuple[ServerRow, ...] = field(default=())

    @property
    def needs_load(self) -> bool:
        return bool(self.changes or self.adopted)


def sort_rows(rows: Iterable[ServerRow]) -> tuple[ServerRow, ...]:
    """Rows in a stable order (hostgroup, host, port): same input, same output."""
    return tuple(sorted(rows, key=lambda r: r.key))
