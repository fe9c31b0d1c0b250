"""Tables of the lab's ProxySQL admin emulator, as ProxySQL 2.7's admin interface defines them.

The DDL is kept in the multi-line form that `SHOW CREATE TABLE` prints on a real ProxySQL 2.7 (its
admin stores one-line DDL and reformats it on output); storing the printed form lets SQLite hand
back the same text and the same constraint-failure messages, which quote the CHECK expressions.
"""

from __future__ import annotations

# --- main (configuration) tables; runtime_* and disk.* copies are derived from these ------------

MYSQL_SERVERS = """CREATE TABLE mysql_servers (
    hostgroup_id INT CHECK (hostgroup_id>=0) NOT NULL DEFAULT 0,
    hostname VARCHAR NOT NULL,
    port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT 3306,
    gtid_port INT CHECK ((gtid_port <> port OR gtid_port=0) AND gtid_port >= 0 AND gtid_port <= 65535) NOT NULL DEFAULT 0,
    status VARCHAR CHECK (UPPER(status) IN ('ONLINE','SHUNNED','OFFLINE_SOFT', 'OFFLINE_HARD')) NOT NULL DEFAULT 'ONLINE',
    weight INT CHECK (weight >= 0 AND weight <=10000000) NOT NULL DEFAULT 1,
    compression INT CHECK (compression IN(0,1)) NOT NULL DEFAULT 0,
    max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 1000,
    max_replication_lag INT CHECK (max_replication_lag >= 0 AND max_replication_lag <= 126144000) NOT NULL DEFAULT 0,
    use_ssl INT CHECK (use_ssl IN(0,1)) NOT NULL DEFAULT 0,
    max_latency_ms INT UNSIGNED CHECK (max_latency_ms>=0) NOT NULL DEFAULT 0,
    comment VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (hostgroup_id, hostname, port) )"""  # noqa: E501

MYSQL_REPLICATION_HOSTGROUPS = """CREATE TABLE mysql_replication_hostgroups (
    writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY,
    reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND reader_hostgroup>=0),
    check_type VARCHAR CHECK (LOWER(check_type) IN ('read_only','innodb_read_only','super_read_only','read_only|innodb_read_only','read_only&innodb_read_only')) NOT NULL DEFAULT 'read_only',
    comment VARCHAR NOT NULL DEFAULT '', UNIQUE (reader_hostgroup))"""  # noqa: E501

_HOSTGROUP_PAIR_COLUMNS = """(
    writer_hostgroup INT CHECK (writer_hostgroup>=0) NOT NULL PRIMARY KEY,
    backup_writer_hostgroup INT CHECK (backup_writer_hostgroup>=0 AND backup_writer_hostgroup<>writer_hostgroup) NOT NULL,
    reader_hostgroup INT NOT NULL CHECK (reader_hostgroup<>writer_hostgroup AND backup_writer_hostgroup<>reader_hostgroup AND reader_hostgroup>0),
    offline_hostgroup INT NOT NULL CHECK (offline_hostgroup<>writer_hostgroup AND offline_hostgroup<>reader_hostgroup AND backup_writer_hostgroup<>offline_hostgroup AND offline_hostgroup>=0),
    active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,
    max_writers INT NOT NULL CHECK (max_writers >= 0) DEFAULT 1,
    writer_is_also_reader INT CHECK (writer_is_also_reader IN (0,1,2)) NOT NULL DEFAULT 0,
    max_transactions_behind INT CHECK (max_transactions_behind>=0) NOT NULL DEFAULT 0,
    comment VARCHAR,
    UNIQUE (reader_hostgroup),
    UNIQUE (offline_hostgroup),
    UNIQUE (backup_writer_hostgroup))"""  # noqa: E501

# Galera and Group Replication hostgroup tables share one column layout in ProxySQL 2.7.
MYSQL_GALERA_HOSTGROUPS = "CREATE TABLE mysql_galera_hostgroups " + _HOSTGROUP_PAIR_COLUMNS
MYSQL_GROUP_REPLICATION_HOSTGROUPS = (
    "CREATE TABLE mysql_group_replication_hostgroups " + _HOSTGROUP_PAIR_COLUMNS
)

MYSQL_HOSTGROUP_ATTRIBUTES = """CREATE TABLE mysql_hostgroup_attributes (
    hostgroup_id INT NOT NULL PRIMARY KEY,
    max_num_online_servers INT CHECK (max_num_online_servers>=0 AND max_num_online_servers <= 1000000) NOT NULL DEFAULT 1000000,
    autocommit INT CHECK (autocommit IN (-1, 0, 1)) NOT NULL DEFAULT -1,
    free_connections_pct INT CHECK (free_connections_pct >= 0 AND free_connections_pct <= 100) NOT NULL DEFAULT 10,
    init_connect VARCHAR NOT NULL DEFAULT '',
    multiplex INT CHECK (multiplex IN (0, 1)) NOT NULL DEFAULT 1,
    connection_warming INT CHECK (connection_warming IN (0, 1)) NOT NULL DEFAULT 0,
    throttle_connections_per_sec INT CHECK (throttle_connections_per_sec >= 1 AND throttle_connections_per_sec <= 1000000) NOT NULL DEFAULT 1000000,
    ignore_session_variables VARCHAR CHECK (JSON_VALID(ignore_session_variables) OR ignore_session_variables = '') NOT NULL DEFAULT '',
    hostgroup_settings VARCHAR CHECK (JSON_VALID(hostgroup_settings) OR hostgroup_settings = '') NOT NULL DEFAULT '',
    servers_defaults VARCHAR CHECK (JSON_VALID(servers_defaults) OR servers_defaults = '') NOT NULL DEFAULT '',
    comment VARCHAR NOT NULL DEFAULT '')"""  # noqa: E501

MYSQL_SERVERS_SSL_PARAMS = """CREATE TABLE mysql_servers_ssl_params (
    hostname VARCHAR NOT NULL,
    port INT CHECK (port >= 0 AND port <= 65535) NOT NULL DEFAULT 3306,
    username VARCHAR NOT NULL DEFAULT '',
    ssl_ca VARCHAR NOT NULL DEFAULT '',
    ssl_cert VARCHAR NOT NULL DEFAULT '',
    ssl_key VARCHAR NOT NULL DEFAULT '',
    ssl_capath VARCHAR NOT NULL DEFAULT '',
    ssl_crl VARCHAR NOT NULL DEFAULT '',
    ssl_crlpath VARCHAR NOT NULL DEFAULT '',
    ssl_cipher VARCHAR NOT NULL DEFAULT '',
    tls_version VARCHAR NOT NULL DEFAULT '',
    comment VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (hostname, port, username) )"""

MYSQL_USERS = """CREATE TABLE mysql_users (
    username VARCHAR NOT NULL,
    password VARCHAR,
    active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,
    use_ssl INT CHECK (use_ssl IN (0,1)) NOT NULL DEFAULT 0,
    default_hostgroup INT NOT NULL DEFAULT 0,
    default_schema VARCHAR,
    schema_locked INT CHECK (schema_locked IN (0,1)) NOT NULL DEFAULT 0,
    transaction_persistent INT CHECK (transaction_persistent IN (0,1)) NOT NULL DEFAULT 1,
    fast_forward INT CHECK (fast_forward IN (0,1)) NOT NULL DEFAULT 0,
    backend INT CHECK (backend IN (0,1)) NOT NULL DEFAULT 1,
    frontend INT CHECK (frontend IN (0,1)) NOT NULL DEFAULT 1,
    max_connections INT CHECK (max_connections >=0) NOT NULL DEFAULT 10000,
    attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '',
    comment VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (username, backend),
    UNIQUE (username, frontend))"""

MYSQL_QUERY_RULES = """CREATE TABLE mysql_query_rules (
    rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 0,
    username VARCHAR,
    schemaname VARCHAR,
    flagIN INT CHECK (flagIN >= 0) NOT NULL DEFAULT 0,
    client_addr VARCHAR,
    proxy_addr VARCHAR,
    proxy_port INT CHECK (proxy_port >= 0 AND proxy_port <= 65535),
    digest VARCHAR,
    match_digest VARCHAR,
    match_pattern VARCHAR,
    negate_match_pattern INT CHECK (negate_match_pattern IN (0,1)) NOT NULL DEFAULT 0,
    re_modifiers VARCHAR DEFAULT 'CASELESS',
    flagOUT INT CHECK (flagOUT >= 0),
    replace_pattern VARCHAR CHECK(CASE WHEN replace_pattern IS NULL THEN 1 WHEN replace_pattern IS NOT NULL AND match_pattern IS NOT NULL THEN 1 ELSE 0 END),
    destination_hostgroup INT DEFAULT NULL,
    cache_ttl INT CHECK(cache_ttl > 0),
    cache_empty_result INT CHECK (cache_empty_result IN (0,1)) DEFAULT NULL,
    cache_timeout INT CHECK(cache_timeout >= 0),
    reconnect INT CHECK (reconnect IN (0,1)) DEFAULT NULL,
    timeout INT UNSIGNED CHECK (timeout >= 0),
    retries INT CHECK (retries>=0 AND retries <=1000),
    delay INT UNSIGNED CHECK (delay >=0),
    next_query_flagIN INT UNSIGNED,
    mirror_flagOUT INT UNSIGNED,
    mirror_hostgroup INT UNSIGNED,
    error_msg VARCHAR,
    OK_msg VARCHAR,
    sticky_conn INT CHECK (sticky_conn IN (0,1)),
    multiplex INT CHECK (multiplex IN (0,1,2)),
    gtid_from_hostgroup INT UNSIGNED,
    log INT CHECK (log IN (0,1)),
    apply INT CHECK(apply IN (0,1)) NOT NULL DEFAULT 0,
    attributes VARCHAR CHECK (JSON_VALID(attributes) OR attributes = '') NOT NULL DEFAULT '',
    comment VARCHAR)"""  # noqa: E501

SCHEDULER = """CREATE TABLE scheduler (
    id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    active INT CHECK (active IN (0,1)) NOT NULL DEFAULT 1,
    interval_ms INTEGER CHECK (interval_ms>=100 AND interval_ms<=100000000) NOT NULL,
    filename VARCHAR NOT NULL,
    arg1 VARCHAR,
    arg2 VARCHAR,
    arg3 VARCHAR,
    arg4 VARCHAR,
    arg5 VARCHAR,
    comment VARCHAR NOT NULL DEFAULT '')"""

PROXYSQL_SERVERS = """CREATE TABLE proxysql_servers (
    hostname VARCHAR NOT NULL,
    port INT NOT NULL DEFAULT 6032,
    weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0,
    comment VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (hostname, port) )"""

GLOBAL_VARIABLES = """CREATE TABLE global_variables (
    variable_name VARCHAR NOT NULL PRIMARY KEY,
    variable_value VARCHAR NOT NULL)"""

# Every configuration table, keyed by name; each has a runtime_<name> and a disk.<name> copy.
MAIN_TABLES: dict[str, str] = {
    "mysql_servers": MYSQL_SERVERS,
    "mysql_replication_hostgroups": MYSQL_REPLICATION_HOSTGROUPS,
    "mysql_group_replication_hostgroups": MYSQL_GROUP_REPLICATION_HOSTGROUPS,
    "mysql_galera_hostgroups": MYSQL_GALERA_HOSTGROUPS,
    "mysql_hostgroup_attributes": MYSQL_HOSTGROUP_ATTRIBUTES,
    "mysql_servers_ssl_params": MYSQL_SERVERS_SSL_PARAMS,
    "mysql_users": MYSQL_USERS,
    "mysql_query_rules": MYSQL_QUERY_RULES,
    "scheduler": SCHEDULER,
    "proxysql_servers": PROXYSQL_SERVERS,
    "global_variables": GLOBAL_VARIABLES,
}

RUNTIME_CHECKSUMS_VALUES = """CREATE TABLE runtime_checksums_values (
    name VARCHAR NOT NULL,
    version INT NOT NULL,
    epoch INT NOT NULL,
    checksum VARCHAR NOT NULL,
    PRIMARY KEY (name))"""

# Lives in the `stats` schema; also reachable unqualified because no main table shares its name.
STATS_MYSQL_CONNECTION_POOL = """CREATE TABLE stats_mysql_connection_pool (
    hostgroup INT,
    srv_host VARCHAR,
    srv_port INT,
    status VARCHAR,
    ConnUsed INT,
    ConnFree INT,
    ConnOK INT,
    ConnERR INT,
    MaxConnUsed INT,
    Queries INT,
    Queries_GTID_sync INT,
    Bytes_data_sent INT,
    Bytes_data_recv INT,
    Latency_us INT)"""


# ProxySQL Cluster: what this proxy last saw of every peer (itself included). A real ProxySQL
# fills them from its cluster checks; in the lab the test harness does (LAB STATS ...).
STATS_PROXYSQL_SERVERS_CHECKSUMS = """CREATE TABLE stats_proxysql_servers_checksums (
    hostname VARCHAR NOT NULL,
    port INT NOT NULL DEFAULT 6032,
    name VARCHAR NOT NULL,
    version INT NOT NULL,
    epoch INT NOT NULL,
    checksum VARCHAR NOT NULL,
    changed_at INT NOT NULL,
    updated_at INT NOT NULL,
    diff_check INT NOT NULL,
    PRIMARY KEY (hostname, port, name) )"""

STATS_PROXYSQL_SERVERS_METRICS = """CREATE TABLE stats_proxysql_servers_metrics (
    hostname VARCHAR NOT NULL,
    port INT NOT NULL DEFAULT 6032,
    weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0,
    comment VARCHAR NOT NULL DEFAULT '',
    response_time_ms INT NOT NULL,
    Uptime_s INT NOT NULL,
    last_check_ms INT NOT NULL,
    Queries INT NOT NULL,
    Client_Connections_connected INT NOT NULL,
    Client_Connections_created INT NOT NULL,
    PRIMARY KEY (hostname, port) )"""

STATS_MYSQL_GLOBAL = """CREATE TABLE stats_mysql_global (
    Variable_Name VARCHAR NOT NULL PRIMARY KEY,
    Variable_Value VARCHAR NOT NULL)"""

# ProxySQL 2.7's client sessions; extended_info is filled only with
# mysql-show_processlist_extended on.
STATS_MYSQL_PROCESSLIST = """CREATE TABLE stats_mysql_processlist (
    ThreadID INT NOT NULL,
    SessionID INTEGER PRIMARY KEY,
    user VARCHAR,
    db VARCHAR,
    cli_host VARCHAR,
    cli_port INT,
    hostgroup INT,
    l_srv_host VARCHAR,
    l_srv_port INT,
    srv_host VARCHAR,
    srv_port INT,
    command VARCHAR,
    time_ms INT NOT NULL,
    info VARCHAR,
    status_flags INT,
    extended_info VARCHAR)"""

STATS_TABLES = (
    STATS_MYSQL_CONNECTION_POOL,
    STATS_MYSQL_PROCESSLIST,
    STATS_PROXYSQL_SERVERS_CHECKSUMS,
    STATS_PROXYSQL_SERVERS_METRICS,
    STATS_MYSQL_GLOBAL,
)


def runtime_ddl(table: str) -> str:
    """DDL of runtime_<table>: the same columns and constraints under the runtime_ name."""
    ddl = MAIN_TABLES[table]
    prefix = f"CREATE TABLE {table} "
    if not ddl.startswith(prefix):
        raise ValueError(f"unexpected DDL head for {table}")
    return f"CREATE TABLE runtime_{table} " + ddl[len(prefix) :]


def qualified_ddl(ddl: str, schema: str) -> str:
    """The DDL creating the same table inside an attached schema (SQLite stores it unqualified)."""
    head = "CREATE TABLE "
    if not ddl.startswith(head):
        raise ValueError("DDL must start with CREATE TABLE")
    return f"{head}{schema}.{ddl[len(head) :]}"


def default_global_variables(admin_iface: str) -> dict[str, str]:
    """ProxySQL 2.7 defaults for the variables a checker or a human may look at.

    Not the full list of a real ProxySQL (several hundred); the values are the documented defaults,
    including the ones the reference pins (connect_timeout_server_max, galera healthcheck, cluster
    check interval).
    """
    return {
        "admin-cluster_check_interval_ms": "1000",
        "admin-cluster_check_status_frequency": "10",
        "admin-cluster_mysql_servers_diffs_before_sync": "3",
        "admin-cluster_password": "",
        "admin-cluster_username": "",
        "admin-mysql_ifaces": admin_iface,
        "admin-read_only": "false",
        "admin-refresh_interval": "2000",
        "admin-restapi_enabled": "false",
        "admin-web_enabled": "false",
        "mysql-auto_increment_delay_multiplex": "5",
        "mysql-auto_increment_delay_multiplex_timeout_ms": "10000",
        "mysql-connect_retries_on_failure": "10",
        "mysql-connect_timeout_client": "10000",
        "mysql-connect_timeout_server": "3000",
        "mysql-connect_timeout_server_max": "10000",
        "mysql-default_max_latency_ms": "1000",
        "mysql-default_query_timeout": "36000000",
        "mysql-free_connections_pct": "10",
        "mysql-hostgroup_manager_verbose": "1",
        "mysql-kill_backend_connection_when_disconnect": "true",
        "mysql-max_connections": "2048",
        "mysql-max_transaction_time": "14400000",
        "mysql-monitor_connect_interval": "60000",
        "mysql-monitor_connect_timeout": "600",
        "mysql-monitor_enabled": "true",
        "mysql-monitor_galera_healthcheck_interval": "2000",
        "mysql-monitor_galera_healthcheck_max_timeout_count": "3",
        "mysql-monitor_galera_healthcheck_timeout": "800",
        "mysql-monitor_groupreplication_healthcheck_interval": "5000",
        "mysql-monitor_groupreplication_healthcheck_max_timeout_count": "3",
        "mysql-monitor_groupreplication_healthcheck_timeout": "800",
        "mysql-monitor_groupreplication_max_transactions_behind_count": "3",
        "mysql-monitor_history": "600000",
        "mysql-monitor_password": "monitor",
        "mysql-monitor_ping_interval": "10000",
        "mysql-monitor_ping_max_failures": "3",
        "mysql-monitor_ping_timeout": "1000",
        "mysql-monitor_read_only_interval": "1500",
        "mysql-monitor_read_only_timeout": "500",
        "mysql-monitor_replication_lag_interval": "10000",
        "mysql-monitor_username": "monitor",
        "mysql-ping_interval_server_msec": "120000",
        "mysql-ping_timeout_server": "500",
        "mysql-poll_timeout": "2000",
        "mysql-query_retries_on_failure": "1",
        "mysql-server_version": "8.0.11",
        "mysql-show_processlist_extended": "0",
        "mysql-shun_on_failures": "5",
        "mysql-shun_recovery_time_sec": "10",
        "mysql-threads": "4",
        "mysql-wait_timeout": "28800000",
    }
