"""The settings as a pass uses them: frozen records, made once by the loader
(checker_core.settings.config) and never changed. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from checker_core.core.leadership import ProxyAddress
from checker_core.core.model import Hostgroups, NodeAddress
from checker_core.core.schema import Checker, SslMode

# the share of run.max_runtime_ms a pass gives its probes; the rest is for reading and writing
# ProxySQL
PROBE_SHARE = 0.6
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104 (where to reach them)


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where the daemon's metrics listener binds."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> ListenAddress:
        """'127.0.0.1:9140', '0.0.0.0:9140', '[::1]:9140' or 'localhost:9140'."""
        head, sep, tail = text.strip().rpartition(":")
        if not sep or not tail.isdigit():
            raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:9140)")
        port = int(tail)
        if not 1 <= port <= 65535:
            raise ValueError(f"{text!r}: port {port} is not between 1 and 65535")
        host = head
        if head.startswith("[") and head.endswith("]"):
            host = head[1:-1]
            import ipaddress  # the daemon's key only: not on the scheduler's path

            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise ValueError(f"{text!r}: {host!r} is not an IPv6 address") from None
        elif ":" in head:
            raise ValueError(f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:{port}")
        if not host:
            raise ValueError(f"{text!r}: no host; use 0.0.0.0:{port} to listen on every address")
        return cls(host, port)

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    def url(self, path: str) -> str:
        """Where a client on this machine reaches `path` (a wildcard address means loopback)."""
        host = _WILDCARDS.get(self.host, self.host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}{path}"

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if self.is_ipv6 else f"{self.host}:{self.port}"


class Secret:
    """A password: usable where needed, never printed."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class Tls:
    """An endpoint's TLS settings; hashable, so a process builds one SSLContext per value."""

    mode: SslMode = SslMode.PREFERRED
    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Credentials and timeouts for one kind of MySQL-protocol peer (ProxySQL admin, backends)."""

    user: str
    password: Secret
    tls: Tls
    connect_timeout_ms: int
    read_timeout_ms: int


@dataclass(frozen=True, slots=True)
class ProxySQLSettings:
    """The ProxySQL admin interface to manage, and how to reach it."""

    host: str
    port: int
    endpoint: Endpoint
    cluster: str = "auto"
    cluster_address: ProxyAddress | None = None  # None: host:port

    @property
    def me(self) -> ProxyAddress:
        """This proxy as its ProxySQL Cluster peers name it."""
        return self.cluster_address or ProxyAddress(self.host, self.port)


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How passes run: their interval and budget, state, logs and the daemon's options."""

    interval_ms: int
    max_runtime_ms: int
    state_dir: Path
    persist: bool
    log_format: str
    log_level: str
    log_stream: str = "stderr"
    metrics_listen: ListenAddress | None = None
    watch_interval_ms: int = 40

    @property
    def probe_budget_ms(self) -> float:
        """What a pass gives its probes of run.max_runtime_ms (the rest is ProxySQL's)."""
        return self.max_runtime_ms * PROBE_SHARE


@dataclass(frozen=True, slots=True)
class HookSettings:
    """Where a cluster's events go: a program (the event as JSON on its stdin) and/or a URL
    (the same JSON POSTed), each given `timeout_ms`; at most `queue` events wait."""

    command: tuple[str, ...] = ()  # argv: an absolute path, then the operator's own arguments
    url: Secret | None = None  # it may carry a token: never printed
    timeout_ms: int = 10000
    queue: int = 100
    events: frozenset[str] = frozenset()  # the events sent; empty: every one

    def wants(self, event: str) -> bool:
        return not self.events or event in self.events


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """One cluster's hostgroups, writer rules and thresholds."""

    name: str
    hostgroups: Hostgroups
    max_writers: int
    writer_is_also_reader: int
    max_transactions_behind: int
    retry_up: int
    retry_down: int
    fail_back: bool
    kill_demoted_writer_connections: bool
    drain_timeout_ms: int
    main_segment: int | None
    brownout: str
    evict_dead_nodes: bool = False
    # a member silent this long (ms) is out as a writer at once, and evicted when the others'
    # replication is stalled on it; 0: never (cluster.evict_unresponsive_nodes off)
    unresponsive_after_ms: int = 0
    # not a configuration key: the writer a switchover chose (kept in the state directory),
    # preferred over weights and fail_back while it is healthy, until released
    preferred_writer: NodeAddress | None = None
    hooks: HookSettings | None = None  # None: no hook is configured


@dataclass(frozen=True, slots=True)
class Settings:
    """A whole configuration as loaded: checker, ProxySQL, run, monitor and clusters."""

    checker: Checker
    source: Path
    proxysql: ProxySQLSettings
    monitor: Endpoint
    run: RunSettings
    clusters: tuple[ClusterSettings, ...]
    warnings: tuple[str, ...] = field(default=())
    # the account for actions on the nodes (eviction, GR switchover); None when not configured
    node_admin: Endpoint | None = None

    def only(self, cluster: ClusterSettings) -> Settings:
        """These settings with `cluster` as their one cluster (what one cluster's runner takes)."""
        return replace(self, clusters=(cluster,))
