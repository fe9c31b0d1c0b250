"""Every configuration key the checkers know: type, default, bounds, and what it means.

config.py validates against this table, and the configuration reference is generated from it,
so a key cannot exist without its documentation.
"""

from __future__ import annotations

from checker_core.core.hook_keys import HOOK_KEYS
from checker_core.core.schema import (
    INT_MAX,
    REQUIRED,
    SSL_MODES,
    Checker,
    Derived,
    Key,
    SslMode,
)


def _ssl_keys(section: str, peer: str) -> tuple[Key, ...]:
    """The TLS keys of one endpoint section ([proxysql] or [monitor])."""
    return (
        Key(
            section,
            "ssl_mode",
            str,
            SslMode.PREFERRED.value,
            f"TLS to {peer}: "
            + ", ".join(f"{mode.value} ({mode.meaning})" for mode in SslMode)
            + ". verify_ca and verify_identity need ssl_ca.",
            choices=SSL_MODES,
        ),
        Key(
            section,
            "ssl_ca",
            str,
            None,
            "CA file the server's certificate is verified against (verify_ca, verify_identity); "
            "the other modes do not verify.",
            optional=True,
        ),
        Key(
            section,
            "ssl_cert",
            str,
            None,
            f"Client certificate presented to {peer} (with ssl_key).",
            optional=True,
        ),
        Key(section, "ssl_key", str, None, "Client key of ssl_cert.", optional=True),
    )


def _password_keys(section: str) -> tuple[Key, ...]:
    """The password of a backend account ([monitor], [node_admin]): inline or in a file."""
    return (
        Key(
            section,
            "password",
            str,
            None,
            "Its password (or password_file).",
            secret=True,
            optional=True,
        ),
        Key(
            section,
            "password_file",
            str,
            None,
            f"File whose first line is the {section} password.",
            optional=True,
        ),
    )


SECTIONS = ("proxysql", "monitor", "node_admin", "run", "cluster")

KEYS: tuple[Key, ...] = (
    # [proxysql]: the admin interface the checker reads and writes
    Key("proxysql", "host", str, "127.0.0.1", "Address of ProxySQL's admin interface."),
    Key(
        "proxysql",
        "port",
        int,
        6032,
        "Port of ProxySQL's admin interface.",
        minimum=1,
        maximum=65535,
    ),
    Key("proxysql", "user", str, "admin", "Admin user."),
    Key(
        "proxysql",
        "password",
        str,
        None,
        "Admin password (or password_file).",
        secret=True,
        optional=True,
    ),
    Key(
        "proxysql",
        "password_file",
        str,
        None,
        "File whose first line is the admin password.",
        optional=True,
    ),
    *_ssl_keys("proxysql", "the admin interface"),
    Key(
        "proxysql",
        "connect_timeout_ms",
        int,
        1000,
        "Admin connect timeout.",
        minimum=1,
        maximum=60000,
    ),
    Key(
        "proxysql",
        "read_timeout_ms",
        int,
        1500,
        "Admin read/write timeout per statement; keep it below run.max_runtime_ms, or a hung "
        "admin statement is cut off by the pass's deadline instead.",
        minimum=1,
        maximum=60000,
    ),
    Key(
        "proxysql",
        "cluster",
        str,
        "auto",
        "ProxySQL Cluster: with `auto`, when runtime_proxysql_servers lists peers, only the "
        "checker of the acting proxy (the first alive peer in hostname, port order) writes and "
        "LOADs; the others probe, judge and report (role `standby`). With `off` this checker "
        "acts on its proxy whatever the peers (for one checker per ProxySQL Cluster only).",
        choices=("auto", "off"),
    ),
    Key(
        "proxysql",
        "cluster_address",
        str,
        None,
        "This proxy as runtime_proxysql_servers names it, `host:port` (default: "
        "proxysql.host:proxysql.port). A pass refuses an address that is not in the list.",
        optional=True,
    ),
    # [monitor]: the account that probes the backends
    Key("monitor", "user", str, "monitor", "Account the checker probes backends with."),
    *_password_keys("monitor"),
    *_ssl_keys("monitor", "the backends"),
    Key(
        "monitor",
        "connect_timeout_ms",
        int,
        500,
        "Probe connect timeout per node.",
        minimum=1,
        maximum=60000,
    ),
    Key(
        "monitor",
        "read_timeout_ms",
        int,
        800,
        "Probe read timeout per node.",
        minimum=1,
        maximum=60000,
    ),
    # [node_admin]: the account for actions on the nodes themselves (optional)
    Key(
        "node_admin",
        "user",
        str,
        None,
        "Account for the actions the checker takes on the nodes themselves: evicting a dead "
        "Galera member (cluster.evict_dead_nodes; SET GLOBAL wsrep_provider_options needs SUPER "
        "on MariaDB, SYSTEM_VARIABLES_ADMIN on MySQL and PXC) and a GR switchover "
        "(group_replication_set_as_primary needs GROUP_REPLICATION_ADMIN). Unset: those actions "
        "are refused; nothing else needs it.",
        optional=True,
    ),
    *_password_keys("node_admin"),
    *_ssl_keys("node_admin", "the backends, as node_admin"),
    Key(
        "node_admin",
        "connect_timeout_ms",
        int,
        500,
        "Connect timeout of node_admin per node.",
        minimum=1,
        maximum=60000,
    ),
    Key(
        "node_admin",
        "read_timeout_ms",
        int,
        2000,
        "Read timeout of node_admin per statement.",
        minimum=1,
        maximum=60000,
    ),
    # [run]: how passes run
    Key(
        "run",
        "interval_ms",
        int,
        2000,
        "Cadence of the daemon, and the interval_ms of the scheduler row.",
        minimum=100,
        maximum=100000000,
    ),
    Key(
        "run",
        "watch_interval_ms",
        int,
        40,
        "The daemon, between passes: how often it asks each writer one cheap question on its "
        "open probe connection (a reject, desync, read_only or a new view starts a pass at "
        "once; so do a closed probe connection and a probe error, whatever this is). 0: no "
        "question asked between passes (closed connections are still watched).",
        minimum=0,
        maximum=60000,
    ),
    Key(
        "run",
        "max_runtime_ms",
        int,
        1800,
        "A pass ends itself before this; keep it below interval_ms.",
        minimum=50,
        maximum=100000000,
    ),
    Key(
        "run",
        "state_dir",
        str,
        "/var/lib/proxysql-checkers",
        "Directory of lock files and remembered counters.",
    ),
    Key(
        "run",
        "persist",
        bool,
        True,
        "SAVE MYSQL SERVERS TO DISK after every LOAD the checker issues.",
    ),
    Key(
        "run",
        "log_format",
        str,
        "auto",
        "auto (console on a terminal, JSON otherwise), json or console.",
        choices=("auto", "json", "console"),
    ),
    Key(
        "run",
        "log_level",
        str,
        "info",
        "debug adds one line per node and pass.",
        choices=("debug", "info", "warning", "error"),
    ),
    Key(
        "run",
        "log_stream",
        str,
        "stderr",
        "Where log lines go; stdout suits containers whose collectors read it.",
        choices=("stderr", "stdout"),
    ),
    Key(
        "run",
        "metrics_listen",
        str,
        None,
        "Daemon only: HOST:PORT serving /metrics (Prometheus), /health and /status, "
        'e.g. "127.0.0.1:9140". Unset: no listener.',
        optional=True,
    ),
    # [[cluster]]: one hostgroup set each
    Key(
        "cluster",
        "name",
        str,
        REQUIRED,
        "Name used in logs, lock and state files ([A-Za-z0-9_.-]).",
    ),
    Key(
        "cluster",
        "writer_hostgroup",
        int,
        REQUIRED,
        "Hostgroup of the writer(s).",
        minimum=0,
        maximum=INT_MAX,
    ),
    Key(
        "cluster",
        "reader_hostgroup",
        int,
        REQUIRED,
        "Hostgroup of the readers.",
        minimum=1,
        maximum=INT_MAX,
    ),
    Key(
        "cluster",
        "backup_writer_hostgroup",
        int,
        REQUIRED,
        "Hostgroup of the healthy writable nodes that are not writers.",
        minimum=0,
        maximum=INT_MAX,
    ),
    Key(
        "cluster",
        "offline_hostgroup",
        int,
        REQUIRED,
        "Hostgroup where unusable nodes are parked.",
        minimum=0,
        maximum=INT_MAX,
    ),
    Key(
        "cluster",
        "config_writer_hostgroup",
        int,
        Derived.CONFIG_WRITER,
        "Template hostgroup: roster and writer weights.",
        minimum=0,
        maximum=INT_MAX,
    ),
    Key(
        "cluster",
        "config_reader_hostgroup",
        int,
        Derived.CONFIG_READER,
        "Template hostgroup: roster and reader weights.",
        minimum=0,
        maximum=INT_MAX,
    ),
    Key("cluster", "max_writers", int, 1, "Never more writers than this.", minimum=1, maximum=1000),
    Key(
        "cluster",
        "writer_is_also_reader",
        int,
        1,
        "0: the writer(s) take no reads, every other healthy node reads (backup writers too); "
        "1: every healthy node reads, writers too; 2: ProxySQL's native meaning, backup writers "
        "and nodes that may not write read, the writer(s) do not (where every node may write, "
        "the same as 0). Nobody else left to read: the writer reads, and the pass says so.",
        minimum=0,
        maximum=2,
    ),
    Key(
        "cluster",
        "max_transactions_behind",
        int,
        0,
        "Receive/applier queue above which a reader is lagging (0: no limit).",
        minimum=0,
        maximum=INT_MAX,
    ),
    Key(
        "cluster",
        "retry_up",
        int,
        0,
        "Good probes in a row before a node is routed again, spanning at least retry_up - 1 "
        "intervals less half of one.",
        minimum=0,
        maximum=1000,
    ),
    Key(
        "cluster",
        "retry_down",
        int,
        0,
        "Bad probes in a row before a node is taken out, spanning at least retry_down - 1 "
        "intervals less half of one (a recheck asks sooner; it does not spend this faster).",
        minimum=0,
        maximum=1000,
    ),
    Key(
        "cluster",
        "fail_back",
        bool,
        False,
        "A returning node with a higher writer weight takes the writer role back.",
    ),
    Key(
        "cluster",
        "kill_demoted_writer_connections",
        bool,
        False,
        "Cut a demoted writer's connections instead of draining them.",
    ),
    Key(
        "cluster",
        "drain_timeout_ms",
        int,
        30000,
        "A demoted writer drains (OFFLINE_SOFT) until its connections are done or this long.",
        minimum=0,
        maximum=INT_MAX,
    ),
    Key(
        "cluster",
        "main_segment",
        int,
        None,
        "Prefer writers in this Galera segment (gmcast.segment).",
        minimum=0,
        maximum=255,
        checkers=(Checker.GALERA,),
        optional=True,
    ),
    Key(
        "cluster",
        "brownout",
        str,
        "hold",
        "A new primary still super_read_only: hold writes (empty writer hostgroup) or route them.",
        choices=("hold", "route"),
        checkers=(Checker.GR,),
    ),
    Key(
        "cluster",
        "evict_dead_nodes",
        bool,
        False,
        "Evict a member whose mysqld is certainly gone (its port refuses connections) from the "
        "survivors' view with evs.evict, so commits resume at once instead of after "
        "evs.suspect_timeout. Never for a node that is only silent. Needs [node_admin]; see "
        "docs/eviction.md.",
        checkers=(Checker.GALERA,),
    ),
    Key(
        "cluster",
        "evict_unresponsive_nodes",
        bool,
        False,
        "Take a member that has not answered for unresponsive_after_ms out of the writer "
        "hostgroup at once, and evict it with evs.evict when a majority of its view answers and "
        "their replication is stalled on it (a frozen member, or one cut off from everyone; "
        "one cut off from the other members only still answers and is left to Galera). A long "
        "pause that would have recovered becomes a restart. Needs [node_admin]; see "
        "docs/eviction.md.",
        checkers=(Checker.GALERA,),
    ),
    Key(
        "cluster",
        "unresponsive_after_ms",
        int,
        1000,
        "How long a member must be silent before evict_unresponsive_nodes acts on it.",
        minimum=200,
        maximum=600000,
        checkers=(Checker.GALERA,),
    ),
    *HOOK_KEYS,
)

KEYS_BY_SECTION: dict[str, dict[str, Key]] = {
    section: {k.name: k for k in KEYS if k.section == section} for section in SECTIONS
}

ENV_PREFIX = "CHECKER_"
