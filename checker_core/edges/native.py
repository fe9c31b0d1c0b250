"""ProxySQL's own managers of a hostgroup set: mysql_galera_hostgroups,
mysql_group_replication_hostgroups and mysql_replication_hostgroups.

A row there makes ProxySQL's monitor move servers between those hostgroups by itself. With this
checker managing the same hostgroups, two managers would fight over every server, silently, each
undoing the other's moves: a configuration error, refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.core.model import BadInput

if TYPE_CHECKING:
    from checker_core.core.settings import ClusterSettings
    from checker_core.edges.proxysql import AdminClient

# (table, its hostgroup columns, whether it has an `active` column)
_TABLES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    (
        "mysql_galera_hostgroups",
        ("writer_hostgroup", "backup_writer_hostgroup", "reader_hostgroup", "offline_hostgroup"),
        True,
    ),
    (
        "mysql_group_replication_hostgroups",
        ("writer_hostgroup", "backup_writer_hostgroup", "reader_hostgroup", "offline_hostgroup"),
        True,
    ),
    ("mysql_replication_hostgroups", ("writer_hostgroup", "reader_hostgroup"), False),
)
_WIDTH = 4


def _query() -> str:
    """One round trip: every row of the three tables, staged (main) and live (runtime).
    Table and column names are constants of this module; there are no values."""
    parts = []
    for table, columns, has_active in _TABLES:
        padded = ", ".join(list(columns) + ["NULL"] * (_WIDTH - len(columns)))
        active = " WHERE active = 1" if has_active else ""
        for layer in ("", "runtime_"):
            parts.append(f"SELECT '{layer}{table}', {padded} FROM {layer}{table}{active}")  # noqa: S608
    return " UNION ALL ".join(parts)


QUERY = _query()


@dataclass(frozen=True, slots=True)
class NativeRow:
    """One row of a native manager table, as (table, {column: hostgroup})."""

    table: str
    hostgroups: tuple[tuple[str, int], ...]


def parse(rows: Iterable[Sequence[object]]) -> tuple[NativeRow, ...]:
    found = []
    for table, *values in rows:
        name = str(table)
        columns = next(c for t, c, _ in _TABLES if name.removeprefix("runtime_") == t)
        pairs = tuple(
            (column, int(str(value)))
            for column, value in zip(columns, values, strict=False)
            if value is not None and str(value).lstrip("-").isdigit()
        )
        found.append(NativeRow(name, pairs))
    return tuple(found)


def conflict(cluster: ClusterSettings, rows: Iterable[NativeRow]) -> str | None:
    """What refuses this cluster: the first native row naming one of its hostgroups (pure)."""
    found = conflict_and_fix(cluster, rows)
    return None if found is None else f"cluster {cluster.name}: {found[0]}; {found[1]}"


def conflict_and_fix(cluster: ClusterSettings, rows: Iterable[NativeRow]) -> tuple[str, str] | None:
    """The first native row naming one of the cluster's hostgroups, and its fix (pure)."""
    hostgroups = cluster.hostgroups
    ours = {
        hostgroups.writer: "writer_hostgroup",
        hostgroups.reader: "reader_hostgroup",
        hostgroups.backup_writer: "backup_writer_hostgroup",
        hostgroups.offline: "offline_hostgroup",
        hostgroups.config_writer: "config_writer_hostgroup",
        hostgroups.config_reader: "config_reader_hostgroup",
    }
    for row in rows:
        for column, hostgroup in row.hostgroups:
            if hostgroup in ours:
                table = row.table.removeprefix("runtime_")
                writer = dict(row.hostgroups).get("writer_hostgroup")
                layer = "live" if row.table.startswith("runtime_") else "staged"
                return (
                    f"{row.table} ({layer}) manages hostgroup {hostgroup} as its {column}, "
                    f"which this checker manages as {ours[hostgroup]}: two managers would "
                    "fight over its servers",
                    f"remove the {table} row of writer_hostgroup {writer} (then LOAD MYSQL "
                    "SERVERS TO RUNTIME) or give this cluster other hostgroups",
                )
    return None


def read(admin: AdminClient) -> tuple[NativeRow, ...]:
    """The native manager rows; none when this ProxySQL has no such tables (older versions)."""
    from checker_core.edges.admin_errors import AdminQueryFailed

    try:
        return parse(admin.execute(QUERY))
    except AdminQueryFailed:
        return ()


def conflicts(admin: AdminClient, clusters: Iterable[ClusterSettings]) -> dict[str, str]:
    """{cluster name: why it is refused} for the clusters a native manager also manages."""
    rows = read(admin)
    found = {}
    for cluster in clusters:
        reason = conflict(cluster, rows)
        if reason is not None:
            found[cluster.name] = reason
    return found


class NativeConflict(BadInput):
    """A cluster's hostgroups are managed by ProxySQL itself too (bad input: exit code 2)."""
