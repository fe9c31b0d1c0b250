"""The roster (every node of a cluster, with its weights) and where ProxySQL has them live now.

The roster lives in ProxySQL itself, in two template hostgroups: a node's row in the writer
template gives its writer weight and attributes, its row in the reader template its reader weight.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from checker_core.core.model import (
    BadInput,
    ClusterRows,
    Hostgroups,
    NodeAddress,
    ServerRow,
    ServerStatus,
    sort_rows,
)


class BadRows(BadInput):
    """ProxySQL holds rows the tool will not act on; every line names a row (exit code 2)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True, slots=True)
class RosterNode:
    """A node the templates name, with its writer and reader rows."""

    node: NodeAddress
    writer: ServerRow | None  # its row in the writer template: a writer candidate
    reader: ServerRow | None  # its row in the reader template: a reader candidate

    @property
    def template(self) -> ServerRow:
        """The attributes to copy when the node is placed (writer template first)."""
        row = self.writer or self.reader
        assert row is not None
        return row

    @property
    def writer_weight(self) -> int:
        return self.writer.weight if self.writer else 0


@dataclass(frozen=True, slots=True)
class Roster:
    """Every node the cluster's templates name, in their order."""

    nodes: tuple[RosterNode, ...]
    _by_node: dict[NodeAddress, RosterNode] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def get(self, node: NodeAddress) -> RosterNode | None:
        if not self._by_node and self.nodes:
            self._by_node.update((n.node, n) for n in reversed(self.nodes))  # the first wins
        return self._by_node.get(node)

    @property
    def addresses(self) -> tuple[NodeAddress, ...]:
        return tuple(n.node for n in self.nodes)


def build_roster(template_rows: Iterable[ServerRow], hostgroups: Hostgroups) -> Roster:
    writers = {r.node: r for r in template_rows if r.hostgroup_id == hostgroups.config_writer}
    readers = {r.node: r for r in template_rows if r.hostgroup_id == hostgroups.config_reader}
    nodes = sorted(writers.keys() | readers.keys())
    return Roster(tuple(RosterNode(n, writers.get(n), readers.get(n)) for n in nodes))


def adopt_templates(
    managed_rows: Iterable[ServerRow], hostgroups: Hostgroups
) -> tuple[ServerRow, ...]:
    """Template rows built from the rows an operator already has in the managed hostgroups.

    Writer and backup-writer rows make writer candidates, reader rows make readers, each with
    the highest weight seen for the node there. A node found only in the offline hostgroup is
    both; a node without a reader row reads with its writer weight (every node can read).
    OFFLINE_HARD rows adopt nothing: they are a server leaving ProxySQL (its runtime leftover
    while clients hold connections) or one an operator took out.
    """
    rows = [r for r in managed_rows if r.status is not ServerStatus.OFFLINE_HARD]

    def heaviest(source: tuple[int, ...]) -> dict[NodeAddress, ServerRow]:
        best: dict[NodeAddress, ServerRow] = {}
        for row in rows:
            if row.hostgroup_id in source and (
                row.node not in best or row.weight > best[row.node].weight
            ):
                best[row.node] = row
        return best

    writers = heaviest((hostgroups.writer, hostgroups.backup_writer))
    readers = heaviest((hostgroups.reader,))
    for node, row in heaviest((hostgroups.offline,)).items():
        if node not in writers and node not in readers:
            writers[node] = row
    for node, row in writers.items():
        readers.setdefault(node, row)
    templates = [r.moved(hostgroups.config_writer, ServerStatus.ONLINE) for r in writers.values()]
    templates += [r.moved(hostgroups.config_reader, ServerStatus.ONLINE) for r in readers.values()]
    return sort_rows(templates)


def roster_templates(
    rows: ClusterRows, hostgroups: Hostgroups
) -> tuple[tuple[ServerRow, ...], tuple[ServerRow, ...]]:
    """(the template rows the roster is built from, the template rows this pass adopts).

    The live templates when ProxySQL has any. Else the templates staged in mysql_servers and
    not loaded yet are an operator's roster and are kept as they are, unless every one of them
    is a row adoption itself would write: then an adoption died half-way and is completed.
    With neither, the roster is adopted from the managed hostgroups.
    """
    live = rows.live(hostgroups.templates)
    if live:
        return live, ()
    adopted = adopt_templates(rows.live(hostgroups.managed), hostgroups)
    staged = sort_rows(rows.staged(hostgroups.templates))
    if staged and not set(staged) <= set(adopted):
        return staged, ()
    return adopted, adopted


@dataclass(frozen=True, slots=True)
class LiveLayout:
    """Where each node is live now, read from runtime_mysql_servers of the managed hostgroups.

    Runtime is ProxySQL's state, mysql_servers is intent: a status only runtime shows (a shun, a
    removed server kept while clients hold connections to it) is never an operator's wish.
    """

    hostgroups: Hostgroups
    rows: tuple[ServerRow, ...]
    # rows an operator set OFFLINE_HARD in mysql_servers: they stay exactly as they are (rule
    # S5). The tool itself never writes OFFLINE_HARD, so a staged one is an operator's
    operator_rows: tuple[ServerRow, ...] = ()
    # OFFLINE_HARD in runtime with no such row staged: a server a LOAD removed that ProxySQL
    # keeps until its clients let go of their connections. Not routed, not staged, not a
    # reason to refuse a pass; the pass line reports it
    leaving: tuple[ServerRow, ...] = ()
    # each (hostgroup, statuses) lookup, made once: a pass asks them per node, and a rebuild
    # per question made a pass's cost grow with the square of the roster
    _lookups: dict[tuple[int, frozenset[ServerStatus]], tuple[NodeAddress, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _routed: list[frozenset[NodeAddress]] = field(
        default_factory=list, init=False, repr=False, compare=False, hash=False
    )
    _blocked: list[frozenset[tuple[NodeAddress, int]]] = field(
        default_factory=list, init=False, repr=False, compare=False, hash=False
    )

    @classmethod
    def of(cls, rows: ClusterRows, hostgroups: Hostgroups) -> LiveLayout:
        managed = hostgroups.managed
        hard = sort_rows(r for r in rows.staged(managed) if r.status is ServerStatus.OFFLINE_HARD)
        operator = {r.key for r in hard}
        live, leaving = [], []
        for row in rows.live(managed):
            if row.status is not ServerStatus.OFFLINE_HARD:
                live.append(row)
            elif row.key not in operator:
                leaving.append(row)
        return cls(hostgroups, tuple(live), hard, tuple(leaving))

    @classmethod
    def planned(cls, hostgroups: Hostgroups, desired: Iterable[ServerRow]) -> LiveLayout:
        """The layout a plan's rows make once loaded; its OFFLINE_HARD rows are an operator's,
        kept as they are (the tool never writes one)."""
        live: list[ServerRow] = []
        hard: list[ServerRow] = []
        for row in sort_rows(desired):
            (hard if row.status is ServerStatus.OFFLINE_HARD else live).append(row)
        return cls(hostgroups, tuple(live), tuple(hard))

    def writes_alone(self, node: NodeAddress) -> bool:
        """`node` is the one writer the writer hostgroup routes to and no demoted writer drains
        there: a planned move is done. SHUNNED stands for its ONLINE row, as in every pass; an
        OFFLINE_HARD row routes nothing (an operator's, or a server leaving while clients still
        hold connections to it), so it blocks nothing."""
        return self.writers == (node,) and not self.draining

    def _nodes(self, hostgroup: int, statuses: Iterable[ServerStatus]) -> tuple[NodeAddress, ...]:
        wanted = frozenset(statuses)
        key = (hostgroup, wanted)
        found = self._lookups.get(key)
        if found is None:
            found = tuple(
                r.node for r in self.rows if r.hostgroup_id == hostgroup and r.status in wanted
            )
            self._lookups[key] = found
        return found

    @property
    def writers(self) -> tuple[NodeAddress, ...]:
        """Serving writers; SHUNNED is ProxySQL's own short-term state and still counts."""
        return self._nodes(self.hostgroups.writer, (ServerStatus.ONLINE, ServerStatus.SHUNNED))

    @property
    def draining(self) -> tuple[NodeAddress, ...]:
        """Demoted writers draining (OFFLINE_SOFT in the writer hostgroup)."""
        return self.draining_in(self.hostgroups.writer)

    def draining_in(self, hostgroup: int) -> tuple[NodeAddress, ...]:
        return self._nodes(hostgroup, (ServerStatus.OFFLINE_SOFT,))

    @property
    def drains(self) -> tuple[tuple[int, NodeAddress], ...]:
        """(hostgroup, node) of every row draining now, in any routed hostgroup."""
        hg = self.hostgroups
        return tuple(
            (h, n) for h in (hg.writer, hg.backup_writer, hg.reader) for n in self.draining_in(h)
        )

    @property
    def backup_writers(self) -> tuple[NodeAddress, ...]:
        return self._nodes(
            self.hostgroups.backup_writer, (ServerStatus.ONLINE, ServerStatus.SHUNNED)
        )

    @property
    def readers(self) -> tuple[NodeAddress, ...]:
        return self._nodes(self.hostgroups.reader, (ServerStatus.ONLINE, ServerStatus.SHUNNED))

    @property
    def shunned_writers(self) -> tuple[NodeAddress, ...]:
        """Writers ProxySQL itself shunned (its monitor or failed connections): ProxySQL brings
        them back on its own, so the tool neither rewrites nor LOADs them."""
        return self._nodes(self.hostgroups.writer, (ServerStatus.SHUNNED,))

    def routed(self, node: NodeAddress) -> bool:
        """Carrying traffic now in some role."""
        if not self._routed:
            self._routed.append(frozenset((*self.writers, *self.backup_writers, *self.readers)))
        return node in self._routed[0]

    def blocked(self, node: NodeAddress, hostgroup: int) -> bool:
        if not self._blocked:
            self._blocked.append(frozenset((r.node, r.hostgroup_id) for r in self.operator_rows))
        return (node, hostgroup) in self._blocked[0]


def check_rows(rows: ClusterRows, hostgroups: Hostgroups, roster: Roster) -> None:
    """Refuse to act on rows of the managed hostgroups that belong to no roster node.

    OFFLINE_HARD rows are exempt: an operator's are kept as they are, and a runtime-only one is
    a server on its way out of ProxySQL (a decommissioned node clients still hold).
    """
    known = set(roster.addresses)
    problems = [
        f"row ({r.hostgroup_id}, {r.hostname}, {r.port}) in runtime_mysql_servers: "
        f"{r.node} is not in the roster (hostgroups {hostgroups.config_writer}/"
        f"{hostgroups.config_reader}); add it there or remove the row"
        for r in rows.live(hostgroups.managed)
        if r.node not in known and r.status is not ServerStatus.OFFLINE_HARD
    ]
    if problems:
        raise BadRows(problems)


def shared_nodes(
    rows: Sequence[ServerRow], clusters: Sequence[tuple[str, Hostgroups]]
) -> dict[str, str]:
    """Clusters (name, hostgroups) whose rosters name the same node, each with why: their
    checkers would fight over it. `rows`: the templates' rows, sorted by hostgroup, so a node
    is named by its first template."""
    # each hostgroup's rows once: a daemon of 200 clusters asks this of 1,200 template rows
    in_hostgroup: dict[int, list[ServerRow]] = {}
    for row in rows:
        in_hostgroup.setdefault(row.hostgroup_id, []).append(row)
    owners: dict[NodeAddress, list[tuple[str, int]]] = {}
    for name, hostgroups in clusters:
        nodes: dict[NodeAddress, int] = {}
        for hostgroup in sorted(set(hostgroups.templates)):
            for row in in_hostgroup.get(hostgroup, ()):
                nodes.setdefault(row.node, hostgroup)
        for node, hostgroup in nodes.items():
            owners.setdefault(node, []).append((name, hostgroup))
    problems: dict[str, str] = {}
    for node, claims in sorted(owners.items()):
        if len(claims) > 1:
            where = " and ".join(f"cluster {name} (hostgroup {hg})" for name, hg in claims)
            for name, _ in claims:
                problems.setdefault(name, f"{node} is in the roster of {where}")
    return problems
