"""A simulated MySQL Group Replication group, as a pure object (the ClusterModel of
tests/lab/sim_model.py): members with their processes and server_uuids, the group's view agreed
by its majority, elections with a super_read_only brownout, members that go silent, are seen
UNREACHABLE and are expelled, partitions where a minority cannot commit, and what each member
answers to the checker's probe from its own view.

    GrCluster(name, addresses, seed, *, unreachable_s=1.0, expel_s=5.0, killed_leave_s=0.5,
              boot_s=1.0, start_s=0.5, recover_s=2.0, rejoin_s=1.0, election_s=0.3,
              brownout_s=0.5, member_host="address", single_primary=True, version="8.0.36",
              weight=50)

The first address bootstraps the group: it starts as the PRIMARY, the others as ONLINE
SECONDARYs. Server_uuids (and a new primary's backlog) come from `seed`: the same seed, commands
and times give the same answers.

Commands (`command`), one JSON object each: {"cmd": ..., "node": "host:port" | [..]} or
{"cmd": ..., "cluster": name} (every node), plus the fields below.

    kill                          the process dies: port REFUSED; its peers drop it from the view
                                  after killed_leave_s (an election if it was the primary)
    restart  [new_identity]       (re)starts the process: REFUSED for boot_s, then listens with
                                  GR OFFLINE for start_s, then joins (RECOVERING for recover_s,
                                  then ONLINE SECONDARY) once the group has a majority to join;
                                  new_identity: true gives it a new server_uuid (a rebuilt node)
    freeze / thaw                 SIGSTOP / SIGCONT: HANG; seen UNREACHABLE after unreachable_s,
                                  expelled expel_s later (if the rest hold a majority)
    slow     delay_ms             every answer of the node takes that long (0: not slow)
    cut / uncut                   only the clients' route to it: HANG, the group is unaffected
    isolate / rejoin              a network partition between the member and the rest (it
                                  outlives a restart: the link, not the process, is cut)
    stop_gr / start_gr            STOP / START GROUP_REPLICATION
    bootstrap                     a member with GR not running starts a new group alone (only
                                  when no member of any partition is ONLINE or RECOVERING)
    set_primary                   group_replication_set_as_primary(<the node's uuid>)
    weight   weight (0..100)      group_replication_member_weight
    set      variables {name: value | null}, applier_queue, version
                                  overrides (read_only, super_read_only, any variable); the
                                  member's applier queue; its MySQL version
    configure  <parameter>: value the timing parameters above (cluster-wide)

A command naming several nodes is refused whole (ValueError) if one of them refuses it; the
reply is {"nodes": [...], "replies": [one per node]}. Commands act at the time of the last
`advance`, and what follows at once (a START GROUP_REPLICATION's join) happens before the reply.

Statements (`statement`): the probe's three SELECTs (flags as 1/0, the member's own view of
replication_group_members, its own replication_group_member_stats row), any `SELECT @@x, ...`,
the switchover's member weight and version, `SELECT group_replication_set_as_primary(...)` (a
Stall until the new primary is writable, then its answer), and writes (INSERT, UPDATE, DELETE,
REPLACE, COMMIT, DDL): committed on the writable primary of the majority, 1290 on a read-only
member, a Stall in a minority (3100 if the member leaves the group while it waits). Anything
else is left to the server (None).

`truth()` is sim_model's shape; each node also has "writes", the writes committed on it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import random
import re
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tests.lab.sim_model import Answer, Done, Failure, Reach, Rows, Stall, sql_words

ONLINE, RECOVERING, OFFLINE, ERROR, UNREACHABLE = (
    "ONLINE",
    "RECOVERING",
    "OFFLINE",
    "ERROR",
    "UNREACHABLE",
)
_IN_GROUP = (ONLINE, RECOVERING)

# how a member left the others' hearing: decides when they show it UNREACHABLE and drop it
_KILLED, _SILENT, _LEFT = "killed", "silent", "left"

_SUPER_RO_MESSAGE = (
    "The MySQL server is running with the --super-read-only option so it cannot execute this "
    "statement"
)
_RO_MESSAGE = (
    "The MySQL server is running with the --read-only option so it cannot execute this statement"
)
_HOOK_MESSAGE = "Error on observer while running replication hook 'before_commit'."
_SET_PRIMARY = "group_replication_set_as_primary"
_WRITE_WORDS = frozenset(
    {"insert", "update", "delete", "replace", "commit", "create", "drop", "alter", "truncate"}
)
# session keys the model keeps on a connection whose statement stalls, to know a re-ask
_STALLED_WRITE = "sim_gr.stalled_write"
_SWITCHING_TO = "sim_gr.switching_to"


@dataclass(slots=True)
class Parameters:
    """The group's timings (seconds) and shape; every field is a constructor keyword and a
    `configure` field."""

    # Real GR's failure detector flags a silent member after a fixed 5 s. The model shortens
    # it to 1 s so a run covers many faults per minute; what matters to the checker is the
    # order of events (silent, then UNREACHABLE, then expelled), which it keeps.
    unreachable_s: float = 1.0
    expel_s: float = 5.0  # group_replication_member_expel_timeout, from UNREACHABLE on
    # a killed process's connections are reset, so its peers notice it at once
    killed_leave_s: float = 0.5
    boot_s: float = 1.0  # a (re)started server's port stays closed this long
    start_s: float = 0.5  # listening with GR OFFLINE before start_on_boot's START GR
    recover_s: float = 2.0  # RECOVERING (distributed recovery) before ONLINE
    rejoin_s: float = 1.0  # ERROR after finding itself expelled, before auto-rejoin begins
    election_s: float = 0.3  # from the view that lost the primary to the new PRIMARY
    brownout_s: float = 0.5  # the new primary applies its backlog with super_read_only ON
    member_host: str = "address"  # MEMBER_HOST: "address" (report_host) or "hostname"
    single_primary: bool = True
    version: str = "8.0.36"
    weight: int = 50

    def update(self, values: Mapping[str, Any]) -> None:
        """Set the named fields; ValueError naming the first bad one, nothing changed."""
        checked: dict[str, Any] = {}
        kinds = {f.name: f.type for f in dataclasses.fields(self)}
        for key, value in values.items():
            if key not in kinds:
                raise ValueError(f"{key}: not a parameter of the GR model ({', '.join(kinds)})")
            if key == "member_host":
                if value not in ("address", "hostname"):
                    raise ValueError(f"member_host: {value!r} is not 'address' or 'hostname'")
            elif key == "single_primary":
                if not isinstance(value, bool):
                    raise ValueError(f"single_primary: {value!r} is not true or false")
            elif key == "version":
                if not isinstance(value, str) or not _version_key(value):
                    raise ValueError(f"version: {value!r} is not a MySQL version like 8.0.36")
            elif key == "weight":
                _check_weight(value)
            elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{key}: {value!r} is not a number of seconds >= 0")
            checked[key] = value
        for key, value in checked.items():
            setattr(self, key, float(value) if key.endswith("_s") else value)


def _check_weight(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise ValueError(f"weight: {value!r} is not an integer from 0 to 100")
    return value


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("-", maxsplit=1)[0].split(".") if p.isdigit())


@dataclass(slots=True)
class _Member:
    """One node: its process and what its Group Replication plugin believes."""

    address: str
    host: str
    port: int
    hostname: str
    uuid: str
    weight: int
    version: str
    proc: str = "up"  # "up" | "booting" | "down"
    frozen: bool = False
    isolated: bool = False
    cut: bool = False
    joining: bool = False  # restarted and not ONLINE since
    gr: str = ONLINE  # its own MEMBER_STATE
    gr_stopped: bool = False  # STOP GROUP_REPLICATION: waits for an operator's START
    super_ro: bool = True
    read_only: bool = True
    delay_ms: float = 0.0
    queue: int = 0  # applier queue set by `set`
    boot_until: float | None = None
    start_at: float | None = None  # START GROUP_REPLICATION (start_on_boot, start_gr)
    rejoin_at: float | None = None  # auto-rejoin after an expulsion
    recover_until: float | None = None
    brownout_until: float | None = None
    brownout_queue: int = 0
    writes: int = 0
    applied: int = 0
    variables: dict[str, str] = field(default_factory=dict)
    # a frozen or isolated member's last knowledge of the group: its view, primary and states
    # when it stopped hearing the others
    known_view: tuple[str, ...] = ()
    known_primary: str | None = None
    known_states: dict[str, str] = field(default_factory=dict)
    cut_off_at: float = 0.0


@dataclass(frozen=True, slots=True)
class _Silence:
    since: float
    kind: str  # _KILLED, _SILENT, _LEFT
    state: str  # the MEMBER_STATE the others last heard


class GrCluster:
    """One simulated Group Replication group (see the module's doc)."""

    kind = "gr"

    def __init__(self, name: str, addresses: tuple[str, ...], seed: int, **parameters: Any):
        if not addresses:
            raise ValueError(f"cluster {name}: no addresses")
        if len(set(addresses)) != len(addresses):
            raise ValueError(f"cluster {name}: an address is named twice")
        self.name = name
        self.params = Parameters()
        self.params.update(parameters)
        self._rng = random.Random(seed)
        self._now = 0.0
        self._changed_at = 0.0
        self._members: list[_Member] = []
        self._owner: dict[str, int] = {}  # every server_uuid ever used -> member index
        for index, address in enumerate(addresses):
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"cluster {name}: {address!r} is not host:port")
            member = _Member(
                address,
                host,
                int(port),
                f"node{index + 1}.sim",
                self._new_uuid(),
                self.params.weight,
                self.params.version,
            )
            self._owner[member.uuid] = index
            self._members.append(member)
        self._by_address = {m.address: i for i, m in enumerate(self._members)}
        self._view: list[str] = [m.uuid for m in self._members]
        self._silent: dict[str, _Silence] = {}
        self._primary: str | None = None
        self._election_at: float | None = None
        first = self._members[0]
        if self.params.single_primary:
            self._primary = first.uuid
            first.super_ro = first.read_only = False
        else:
            for member in self._members:
                member.super_ro = member.read_only = False

    # ---- the Protocol ----------------------------------------------------------------------

    def nodes(self) -> tuple[str, ...]:
        return tuple(m.address for m in self._members)

    def advance(self, now: float) -> None:
        for _ in range(100_000):  # each step consumes one due event: bounded by their number
            due = self._next_event()
            if due is None or due[0] > now:
                break
            self._now = max(self._now, due[0])
            due[1]()
            self._settle()
            self._changed_at = self._now
        else:
            raise RuntimeError(f"cluster {self.name}: events do not settle at {now}")
        self._now = max(self._now, now)

    def reach(self, node: str) -> Reach:
        member = self._member(node)
        if member.proc != "up":
            return Reach.REFUSED
        if member.frozen or member.cut:
            return Reach.HANG
        return Reach.LISTEN

    def delay_s(self, node: str) -> float:
        return self._member(node).delay_ms / 1000

    def globals(self, node: str) -> tuple[Mapping[str, str], Mapping[str, str]]:
        member = self._member(node)
        rows = self._own_view(member)
        primary = next((r[0] for r in rows if r[4] == "PRIMARY" and r[3] != UNREACHABLE), "")
        status = {
            "group_replication_primary_member": primary if self.params.single_primary else "",
        }
        return status, self._variables(member)

    def statement(self, node: str, session: MutableMapping[str, str], sql: str) -> Answer | None:
        member = self._member(node)
        words = sql_words(sql)
        first = words.split(" ", 1)[0]
        if first in _WRITE_WORDS:
            return self._write(member, session)
        if first != "select":
            return None
        if _SET_PRIMARY in words:
            return self._set_primary_call(member, session, sql)
        if "performance_schema.replication_group_member_stats" in words:
            return self._select_table(member, sql, words, self._stats_rows(member))
        if "performance_schema.replication_group_members" in words:
            return self._select_table(member, sql, words, self._member_rows(member))
        if " from " not in f" {words} ":
            return self._select_variables(member, sql)
        return None

    def command(self, message: Mapping[str, Any]) -> Mapping[str, object]:
        cmd = message.get("cmd")
        if cmd == "configure":
            values = {k: v for k, v in message.items() if k not in ("cmd", "cluster", "id")}
            fixed = sorted(set(values) & {"single_primary", "version", "weight"})
            if fixed:
                raise ValueError(
                    f"{fixed[0]}: set at construction only (per member: `set`, `weight`)"
                )
            self.params.update(values)
            self._changed_at = self._now
            return {"parameters": dataclasses.asdict(self.params)}
        action = self._ACTIONS.get(str(cmd))
        if action is None:
            known = ", ".join(sorted([*self._ACTIONS, "configure"]))
            raise ValueError(f"cmd: {cmd!r} is not a GR model command ({known})")
        indexes = self._targets(message)
        saved = copy.deepcopy(self.__dict__)
        try:
            replies = [action(self, self._members[i], message) for i in indexes]
        except ValueError:
            self.__dict__.update(saved)  # a refused command changes nothing, on any node
            raise
        self._settle()
        self._changed_at = self._now
        self.advance(self._now)  # what follows at once (a START GROUP_REPLICATION's join)
        return {"nodes": [self._members[i].address for i in indexes], "replies": replies}

    def truth(self) -> Mapping[str, object]:
        nodes: dict[str, object] = {}
        for member in self._members:
            in_primary = self._in_majority(member)
            own = self._own_state(member)
            nodes[member.address] = {
                "process": self._process(member),
                "identity": None if member.proc == "down" else member.uuid,
                "reach": self.reach(member.address).name,
                "in_primary": in_primary,
                "writable": self._writable(member),
                "readable": in_primary,
                "evicted": False,
                "needs_restart": member.proc == "down" or member.gr_stopped,
                "state": "" if member.proc == "down" else own,
                "role": self._own_role(member) if own in _IN_GROUP else None,
                "evict_list": [],
                "silenced": False,
                "writes": member.writes,
            }
        return {
            "kind": self.kind,
            "name": self.name,
            "changed_at": self._changed_at,
            "nodes": nodes,
        }

    # ---- the group's state -----------------------------------------------------------------

    def _new_uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _member(self, node: str) -> _Member:
        index = self._by_address.get(node)
        if index is None:
            raise ValueError(f"node: {node!r} is not a node of cluster {self.name}")
        return self._members[index]

    def _targets(self, message: Mapping[str, Any]) -> list[int]:
        if "cluster" in message:
            if message["cluster"] != self.name:
                raise ValueError(f"cluster: {message['cluster']!r} is not {self.name!r}")
            return list(range(len(self._members)))
        named = message.get("node")
        names: list[object] = named if isinstance(named, list) else [named]
        found = []
        for name in names:
            if not isinstance(name, str):
                raise ValueError(
                    "node: give a node's 'host:port' (or a list of them), or 'cluster'"
                )
            found.append(self._by_address[self._member(name).address])
        if not found:
            raise ValueError("node: an empty list names no node")
        return found

    def _talks(self, member: _Member) -> bool:
        """Its GR plugin runs and can be heard by the group's members it can reach."""
        return member.proc == "up" and not member.frozen and member.gr in _IN_GROUP

    def _core(self) -> list[str]:
        """The members of the view that hear each other (all but the isolated and silent)."""
        return [
            u
            for u in self._view
            if (m := self._members[self._owner[u]]).uuid == u and self._talks(m) and not m.isolated
        ]

    def _majority(self) -> set[str] | None:
        """The partition that holds a majority of the last view, if one does."""
        core = self._core()
        if len(core) * 2 > len(self._view):
            return set(core)
        for u in self._view:
            member = self._members[self._owner[u]]
            # alone in a group of one
            if member.uuid == u and member.isolated and self._talks(member) and len(self._view) < 2:
                return {u}
        return None

    def _in_majority(self, member: _Member) -> bool:
        majority = self._majority()
        return member.gr == ONLINE and majority is not None and member.uuid in majority

    def _writable(self, member: _Member) -> bool:
        if not self._in_majority(member) or member.super_ro or member.read_only:
            return False
        return not self.params.single_primary or member.uuid == self._primary

    def _process(self, member: _Member) -> str:
        if member.proc == "down":
            return "killed"
        if member.frozen:
            return "frozen"
        if member.isolated:
            return "isolated"
        if member.proc == "booting" or member.joining:
            return "joining"
        return "running"

    def _role(self, u: str, state: str) -> str:
        if not self.params.single_primary:
            return "PRIMARY" if state in (ONLINE, UNREACHABLE) else "SECONDARY"
        return "PRIMARY" if u == self._primary else "SECONDARY"

    def _own_state(self, member: _Member) -> str:
        return member.gr

    def _own_role(self, member: _Member) -> str | None:
        for row in self._own_view(member):
            if row[0] == member.uuid:
                return row[4] or None
        return None

    def _silence(self, member: _Member, kind: str) -> None:
        """The member stops being heard: the others will show it UNREACHABLE, then drop it."""
        if member.uuid in self._view and member.uuid not in self._silent:
            self._silent[member.uuid] = _Silence(self._now, kind, member.gr)

    def _heard_again(self, member: _Member) -> None:
        """A frozen or isolated member is heard again: back in the group if it is still in the
        view, otherwise it learns it was expelled."""
        if member.proc != "up" or member.frozen or member.isolated or member.gr not in _IN_GROUP:
            return
        if member.uuid in self._view:
            self._silent.pop(member.uuid, None)
            return
        self._expelled(member)

    def _expelled(self, member: _Member) -> None:
        member.gr = ERROR
        member.super_ro = member.read_only = True
        member.brownout_until = member.recover_until = None
        member.rejoin_at = self._now + self.params.rejoin_s

    def _settle(self) -> None:
        """What follows at once from the state: expulsions found out, an election to hold."""
        for member in self._members:
            if (
                member.proc == "up"
                and not member.frozen
                and not member.isolated
                and member.gr in _IN_GROUP
                and member.uuid not in self._view
            ):
                self._expelled(member)
        if (
            self.params.single_primary
            and self._primary is None
            and self._election_at is None
            and self._candidates()
        ):
            self._election_at = self._now + self.params.election_s

    def _candidates(self) -> list[_Member]:
        majority = self._majority() or set()
        return [
            m
            for u in self._view
            if u in majority and (m := self._members[self._owner[u]]).gr == ONLINE
        ]

    def _elect(self, members: list[_Member]) -> _Member:
        """The group's rule: the lowest MySQL version (patch level counted only when every
        member is newer than 8.0.16), then the highest member weight, then the lowest
        server_uuid."""
        patch = all(_version_key(m.version) > (8, 0, 16) for m in members)

        def key(m: _Member) -> tuple[tuple[int, ...], int, str]:
            version = _version_key(m.version)
            return (version if patch else version[:2], -m.weight, m.uuid)

        return min(members, key=key)

    def _make_primary(self, member: _Member) -> None:
        self._primary = member.uuid
        member.super_ro = member.read_only = True
        member.brownout_until = self._now + self.params.brownout_s
        member.brownout_queue = self._rng.randint(20, 400)

    # ---- events ----------------------------------------------------------------------------

    def _next_event(self) -> tuple[float, Callable[[], None]] | None:
        """The earliest event that can happen now, with what it does."""
        found: list[tuple[float, int, Callable[[], None]]] = []
        p = self.params
        majority = self._majority()
        for index, m in enumerate(self._members):
            if m.proc == "booting" and m.boot_until is not None and not m.frozen:
                found.append((m.boot_until, index, functools.partial(self._booted, m)))
            if not self._talks(m) and m.proc == "up" and not m.frozen:
                wake = m.start_at if m.gr == OFFLINE else m.rejoin_at if m.gr == ERROR else None
                if wake is not None and self._may_join(m, majority):
                    found.append((wake, index, functools.partial(self._join, m)))
            if (
                m.gr == RECOVERING
                and m.recover_until is not None
                and majority is not None
                and m.uuid in majority
            ):
                found.append((m.recover_until, index, functools.partial(self._recovered, m)))
            if m.brownout_until is not None and m.proc == "up" and not m.frozen:
                found.append((m.brownout_until, index, functools.partial(self._brownout_ends, m)))
        if majority is not None:
            for u, silence in self._silent.items():
                if u in self._view and u not in majority:
                    at = (
                        silence.since
                        + {
                            _KILLED: p.killed_leave_s,
                            _LEFT: 0.0,
                            _SILENT: p.unreachable_s + p.expel_s,
                        }[silence.kind]
                    )
                    found.append((at, len(self._members), functools.partial(self._remove, u)))
            if self._election_at is not None and self._primary is None:
                found.append((self._election_at, len(self._members) + 1, self._election))
        if not found:
            return None
        at, _, action = min(found, key=lambda f: (f[0], f[1]))
        return at, action

    def _may_join(self, member: _Member, majority: set[str] | None) -> bool:
        """A member outside the group joins the majority's partition: it must reach it, its old
        incarnation must be gone from the view, and someone ONLINE must give it the data."""
        if member.isolated or member.gr_stopped or member.uuid in self._view or not majority:
            return False
        return any(self._members[self._owner[u]].gr == ONLINE for u in majority) and not any(
            self._members[self._owner[u]].isolated for u in majority
        )

    def _booted(self, member: _Member) -> None:
        member.proc = "up"
        member.boot_until = None
        member.gr = OFFLINE
        member.start_at = self._now + self.params.start_s

    def _join(self, member: _Member) -> None:
        self._view.append(member.uuid)
        member.gr = RECOVERING
        member.start_at = member.rejoin_at = None
        member.super_ro = member.read_only = True
        member.recover_until = self._now + self.params.recover_s

    def _recovered(self, member: _Member) -> None:
        member.gr = ONLINE
        member.recover_until = None
        member.joining = False
        if not self.params.single_primary:
            member.super_ro = member.read_only = False

    def _brownout_ends(self, member: _Member) -> None:
        member.brownout_until = None
        if member.uuid == self._primary:
            member.super_ro = member.read_only = False

    def _remove(self, u: str) -> None:
        """The majority installs a view without `u` (expelled, killed, left)."""
        self._view.remove(u)
        self._silent.pop(u, None)
        if u == self._primary:
            self._primary = None
            self._election_at = None  # held from this view on (_settle)
        owner = self._members[self._owner[u]]
        if owner.uuid == u:
            owner.brownout_until = None

    def _election(self) -> None:
        self._election_at = None
        candidates = self._candidates()
        if candidates:
            self._make_primary(self._elect(candidates))

    # ---- commands --------------------------------------------------------------------------

    def _kill(self, member: _Member, message: Mapping[str, Any]) -> object:
        if member.proc == "down":
            return "already killed"
        earlier = self._silent.pop(member.uuid, None)
        self._silence(member, _KILLED)
        if earlier is not None and member.uuid in self._silent:
            # its peers had stopped hearing it already; now its connections reset too
            shown = self._now >= earlier.since + self.params.unreachable_s
            self._silent[member.uuid] = _Silence(
                self._now, _KILLED, UNREACHABLE if shown else earlier.state
            )
        member.proc = "down"
        member.frozen = False
        member.joining = False
        member.gr = OFFLINE
        member.gr_stopped = False
        member.boot_until = member.start_at = member.rejoin_at = None
        member.recover_until = member.brownout_until = None
        return "killed"

    def _restart(self, member: _Member, message: Mapping[str, Any]) -> object:
        new_identity = message.get("new_identity", False)
        if not isinstance(new_identity, bool):
            raise ValueError(f"new_identity: {new_identity!r} is not true or false")
        self._kill(member, message)
        if new_identity:
            member.uuid = self._new_uuid()
            self._owner[member.uuid] = self._by_address[member.address]
        member.proc = "booting"
        member.joining = True
        member.super_ro = member.read_only = True
        member.boot_until = self._now + self.params.boot_s
        return {"identity": member.uuid}

    def _freeze(self, member: _Member, message: Mapping[str, Any]) -> object:
        if member.proc == "down":
            raise ValueError(f"node: {member.address} is killed; restart it instead")
        if member.gr in _IN_GROUP and not member.isolated:
            self._silence(member, _SILENT)
        self._remember(member)
        member.frozen = True
        return "frozen"

    def _thaw(self, member: _Member, message: Mapping[str, Any]) -> object:
        member.frozen = False
        self._heard_again(member)
        return member.gr

    def _slow(self, member: _Member, message: Mapping[str, Any]) -> object:
        delay = message.get("delay_ms")
        if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
            raise ValueError(f"delay_ms: {delay!r} is not a number of milliseconds >= 0")
        member.delay_ms = float(delay)
        return member.delay_ms

    def _cut(self, member: _Member, message: Mapping[str, Any]) -> object:
        member.cut = message["cmd"] == "cut"
        return member.cut

    def _isolate(self, member: _Member, message: Mapping[str, Any]) -> object:
        if member.isolated:
            return "already isolated"
        if self._talks(member):
            self._silence(member, _SILENT)
        self._remember(member)
        member.isolated = True
        return "isolated"

    def _remember(self, member: _Member) -> None:
        """What the member knows of the group as it stops hearing the others."""
        if member.frozen or member.isolated:
            return  # it stopped hearing them already
        rows = self._own_view(member)
        member.known_view = tuple(r[0] for r in rows)
        member.known_primary = next((r[0] for r in rows if r[4] == "PRIMARY"), None)
        member.known_states = {r[0]: r[3] for r in rows}
        member.cut_off_at = self._now

    def _rejoin(self, member: _Member, message: Mapping[str, Any]) -> object:
        member.isolated = False
        self._heard_again(member)
        return member.gr

    def _stop_gr(self, member: _Member, message: Mapping[str, Any]) -> object:
        if member.proc != "up":
            raise ValueError(f"node: {member.address} is not running")
        if member.gr in _IN_GROUP and member.uuid in self._view:
            self._silence(member, _LEFT)
        member.gr = OFFLINE
        member.gr_stopped = True
        member.super_ro = member.read_only = True
        member.start_at = member.rejoin_at = member.recover_until = member.brownout_until = None
        return OFFLINE

    def _start_gr(self, member: _Member, message: Mapping[str, Any]) -> object:
        if member.proc != "up":
            raise ValueError(f"node: {member.address} is not running")
        if member.gr in _IN_GROUP:
            return member.gr
        member.gr = OFFLINE
        member.gr_stopped = False
        member.rejoin_at = None
        member.start_at = self._now
        return "starting"

    def _bootstrap(self, member: _Member, message: Mapping[str, Any]) -> object:
        if member.proc != "up" or member.frozen:
            raise ValueError(f"node: {member.address} is not running")
        busy = [m.address for m in self._members if m.proc != "down" and m.gr in _IN_GROUP]
        if busy:
            raise ValueError(
                f"node: {member.address} cannot bootstrap: {', '.join(busy)} still in a group"
            )
        self._view = [member.uuid]
        self._silent.clear()
        self._election_at = None
        member.gr = ONLINE
        member.gr_stopped = member.joining = False
        member.start_at = member.rejoin_at = None
        if self.params.single_primary:
            self._primary = member.uuid
        member.super_ro = member.read_only = False
        return {"primary": member.uuid}

    def _set_primary(self, member: _Member, message: Mapping[str, Any]) -> object:
        # run on the target itself, as `gr-checker switchover` does
        refused = self._switch(member, member.uuid)
        if isinstance(refused, Failure):
            raise ValueError(f"node: {member.address}: {refused.message}")
        if isinstance(refused, Stall):
            raise ValueError(f"node: {member.address}: {refused.reason}")
        return {"primary": member.uuid, "result": refused}

    def _weight(self, member: _Member, message: Mapping[str, Any]) -> object:
        member.weight = _check_weight(message.get("weight"))
        return member.weight

    def _set(self, member: _Member, message: Mapping[str, Any]) -> object:
        variables = message.get("variables", {})
        queue = message.get("applier_queue", member.queue)
        version = message.get("version", member.version)
        if not isinstance(variables, dict):
            raise ValueError("variables: give an object of variable names and values")
        if isinstance(queue, bool) or not isinstance(queue, int) or queue < 0:
            raise ValueError(f"applier_queue: {queue!r} is not a count >= 0")
        if not isinstance(version, str) or not _version_key(version):
            raise ValueError(f"version: {version!r} is not a MySQL version like 8.0.36")
        spelt: dict[str, str | None] = {}
        for name, value in variables.items():
            key = str(name).lower()
            if value is None:
                spelt[key] = None
            elif isinstance(value, bool):
                spelt[key] = "ON" if value else "OFF"
            elif key in ("read_only", "super_read_only") and str(value).upper() not in (
                "ON",
                "OFF",
                "1",
                "0",
            ):
                raise ValueError(f"variables: {key}: {value!r} is not ON or OFF")
            else:
                spelt[key] = str(value)
        for key, text in spelt.items():
            if key in ("read_only", "super_read_only"):
                on = text is not None and text.upper() in ("ON", "1")
                if key == "super_read_only":
                    member.super_ro = on
                    member.read_only = member.read_only or on
                else:
                    member.read_only = on
                    member.super_ro = member.super_ro and on
            elif text is None:
                member.variables.pop(key, None)
            else:
                member.variables[key] = text
        member.queue, member.version = queue, version
        return {"super_read_only": member.super_ro, "read_only": member.read_only}

    _ACTIONS: ClassVar[dict[str, Callable[[GrCluster, _Member, Mapping[str, Any]], object]]] = {
        "kill": _kill,
        "restart": _restart,
        "freeze": _freeze,
        "thaw": _thaw,
        "slow": _slow,
        "cut": _cut,
        "uncut": _cut,
        "isolate": _isolate,
        "rejoin": _rejoin,
        "stop_gr": _stop_gr,
        "start_gr": _start_gr,
        "bootstrap": _bootstrap,
        "set_primary": _set_primary,
        "weight": _weight,
        "set": _set,
    }

    # ---- answers ---------------------------------------------------------------------------

    def _own_view(self, member: _Member) -> list[tuple[str, str, int, str, str]]:
        """replication_group_members as the member sees it: (id, host, port, state, role)."""
        if member.gr not in _IN_GROUP:
            return [self._row(member.uuid, member.gr, "")]
        if (member.frozen or member.isolated) and self._majority() != {member.uuid}:
            late = self._now >= member.cut_off_at + self.params.unreachable_s
            rows = []
            known = member.known_view
            for u in known if member.uuid in known else (*known, member.uuid):
                if u == member.uuid:
                    state = member.gr
                else:
                    state = UNREACHABLE if late else member.known_states.get(u, ONLINE)
                if not self.params.single_primary:
                    role = "PRIMARY" if member.known_states.get(u) == ONLINE else "SECONDARY"
                else:
                    role = "PRIMARY" if u == member.known_primary else "SECONDARY"
                rows.append(self._row(u, state, role))
            return rows
        rows = []
        for u in self._view:
            owner = self._members[self._owner[u]]
            silence = self._silent.get(u)
            if u == member.uuid or (silence is None and owner.uuid == u):
                state = owner.gr
            else:
                heard = silence or _Silence(self._now, _SILENT, ONLINE)
                shown = (
                    self.params.killed_leave_s
                    if heard.kind == _KILLED
                    else self.params.unreachable_s
                )
                state = UNREACHABLE if self._now >= heard.since + shown else heard.state
            rows.append(self._row(u, state, self._role(u, state)))
        return rows

    def _row(self, u: str, state: str, role: str) -> tuple[str, str, int, str, str]:
        owner = self._members[self._owner[u]]
        host = owner.hostname if self.params.member_host == "hostname" else owner.host
        return (u, host, owner.port, state, role)

    def _applier_queue(self, member: _Member) -> int:
        until = member.brownout_until
        if until is None or self.params.brownout_s <= 0:
            return member.queue
        left = max(0.0, until - self._now) / self.params.brownout_s
        return member.queue + math.ceil(member.brownout_queue * left)

    def _variables(self, member: _Member) -> dict[str, str]:
        def on(flag: bool) -> str:
            return "ON" if flag else "OFF"

        found = {
            "server_uuid": member.uuid,
            "super_read_only": on(member.super_ro),
            "read_only": on(member.read_only),
            "group_replication_single_primary_mode": on(self.params.single_primary),
            # the variable is whole seconds: a fraction reads as the next second
            "group_replication_member_expel_timeout": str(math.ceil(self.params.expel_s)),
            "group_replication_member_weight": str(member.weight),
            "group_replication_start_on_boot": "ON",
            "version": member.version,
            "hostname": member.hostname,
            "report_host": member.host if self.params.member_host == "address" else "",
            "port": str(member.port),
        }
        found.update(member.variables)
        return found

    def _member_rows(self, member: _Member) -> list[dict[str, str | None]]:
        rows: list[dict[str, str | None]] = []
        for u, host, port, state, role in self._own_view(member):
            owner = self._members[self._owner[u]]
            rows.append(
                {
                    "channel_name": "group_replication_applier",
                    "member_id": u,
                    "member_host": host,
                    "member_port": str(port),
                    "member_state": state,
                    "member_role": role,
                    "member_version": owner.version if role else "",
                    "member_communication_stack": "XCom",
                }
            )
        return rows

    def _stats_rows(self, member: _Member) -> list[dict[str, str | None]]:
        if member.gr == OFFLINE:
            return []
        row: list[dict[str, str | None]] = [
            {
                "channel_name": "group_replication_applier",
                "member_id": member.uuid,
                "count_transactions_remote_in_applier_queue": str(self._applier_queue(member)),
                "count_transactions_in_queue": "0",
                "count_transactions_remote_applied": str(member.applied),
                "count_transactions_checked": str(member.writes + member.applied),
            }
        ]
        return row

    def _select_table(
        self, member: _Member, sql: str, words: str, table: list[dict[str, str | None]]
    ) -> Answer:
        """SELECT <columns and @@variables> FROM <table> [WHERE MEMBER_ID = @@server_uuid]."""
        found = re.match(r"\s*select\s+(.*?)\s+from\s", sql, re.IGNORECASE | re.DOTALL)
        if found is None:
            return _syntax_error(sql)
        items = _items(found.group(1))
        if " where " in words:
            if not re.search(r"where member_id = @@(global\.)?server_uuid$", words):
                return Failure(1064, "42000", f"the GR model cannot filter by: {sql}")
            table = [r for r in table if r["member_id"] == member.uuid]
        variables = self._variables(member)
        out: list[tuple[str | None, ...]] = []
        for row in table:
            values: list[str | None] = []
            for item in items:
                name = item.lower()
                if name.startswith("@@"):
                    value = _variable(variables, name)
                    if isinstance(value, Failure):
                        return value
                    values.append(value)
                elif name in row:
                    values.append(row[name])
                else:
                    return Failure(1054, "42S22", f"Unknown column '{item}' in 'field list'")
            out.append(tuple(values))
        return Rows(tuple(items), tuple(out))

    def _select_variables(self, member: _Member, sql: str) -> Answer | None:
        """SELECT @@a, @@global.b, ...: only variables (anything else: the server's answer)."""
        body = re.match(r"\s*select\s+(.*?)\s*;?\s*$", sql, re.IGNORECASE | re.DOTALL)
        if body is None:
            return None
        items = _items(body.group(1))
        if not items or not all(i.startswith("@@") for i in items):
            return None
        variables = self._variables(member)
        values: list[str | None] = []
        for item in items:
            value = _variable(variables, item.lower())
            if isinstance(value, Failure):
                return value
            values.append(value)
        return Rows(tuple(items), (tuple(values),))

    def _write(self, member: _Member, session: MutableMapping[str, str]) -> Answer:
        """A write commits on the group's primary, writable, in the majority; a minority's
        commit waits for the group (it stalls, as real GR's does)."""
        retried = session.pop(_STALLED_WRITE, None) is not None
        if self._writable(member):
            self._commit(member)
            return Done()
        majority = self._majority()
        may_commit = not member.super_ro and not member.read_only
        primary = not self.params.single_primary or member.uuid == self._primary
        outvoted = majority is None or member.uuid not in majority
        if may_commit and primary and member.gr == ONLINE and outvoted:
            session[_STALLED_WRITE] = "1"
            return Stall(f"{member.address}: in a minority, the commit waits for the group")
        if retried:  # the member left the group while its commit waited: rolled back
            return Failure(3100, "HY000", _HOOK_MESSAGE)
        if member.super_ro:
            return Failure(1290, "HY000", _SUPER_RO_MESSAGE)
        if member.read_only:
            return Failure(1290, "HY000", _RO_MESSAGE)
        # writable flags on a member that is not the primary, or out of the group: GR's
        # before_commit hook refuses the transaction
        return Failure(3100, "HY000", _HOOK_MESSAGE)

    def _commit(self, member: _Member) -> None:
        member.writes += 1
        majority = self._majority() or set()
        for u in majority:
            other = self._members[self._owner[u]]
            if other is not member:
                other.applied += 1
        self._changed_at = self._now

    def _set_primary_call(
        self, member: _Member, session: MutableMapping[str, str], sql: str
    ) -> Answer:
        """SELECT group_replication_set_as_primary('uuid'[, timeout]): returns once the new
        primary is writable (a Stall until then)."""
        found = re.search(
            r"(group_replication_set_as_primary\s*\(\s*'([^']*)'\s*(?:,\s*(\d+)\s*)?\))",
            sql,
            re.IGNORECASE,
        )
        if found is None:
            return _syntax_error(sql)
        label, target = found.group(1), found.group(2)
        waiting = session.get(_SWITCHING_TO)
        if waiting == target:
            owner = self._members[self._owner[target]] if target in self._owner else None
            if owner is not None and self._primary == target and owner.uuid == target:
                if not owner.super_ro:
                    session.pop(_SWITCHING_TO, None)
                    return Rows((label,), ((f"Primary server switched to: {target}",),))
                return Stall(f"{target}: the new primary is applying its backlog")
            session.pop(_SWITCHING_TO, None)
            return Failure(
                3910,
                "HY000",
                f"The function '{_SET_PRIMARY}' failed. The primary changed while the "
                "operation ran.",
            )
        result = self._switch(member, target)
        if isinstance(result, Failure | Stall):
            return result
        if result == "switched":
            session[_SWITCHING_TO] = target
            self._changed_at = self._now
            return Stall(f"{target}: the new primary is applying its backlog")
        return Rows((label,), ((result,),))

    def _switch(self, asked: _Member, target: str) -> str | Failure | Stall:
        """group_replication_set_as_primary run on `asked`: "switched", the function's answer
        when nothing was to be done, or its error."""

        def cannot(why: str) -> Failure:
            return Failure(1123, "HY000", f"Can't initialize function '{_SET_PRIMARY}'; {why}")

        if not self.params.single_primary:
            return cannot(
                "In multi-primary mode. Use group_replication_switch_to_single_primary_mode."
            )
        if asked.gr != ONLINE or asked.uuid not in self._view:
            return cannot("Member must be ONLINE to execute this action.")
        majority = self._majority()
        if majority is None or asked.uuid not in majority:
            return Stall(f"{asked.address}: in a minority, the group cannot agree on a new primary")
        if target not in self._view:
            return cannot("The requested uuid is not a member of the group.")
        new = self._members[self._owner[target]]
        if new.uuid != target or target not in majority or new.gr != ONLINE:
            return Failure(
                3910,
                "HY000",
                f"The function '{_SET_PRIMARY}' failed. The appointed primary is not ONLINE.",
            )
        lowest = min(_version_key(self._members[self._owner[u]].version) for u in majority)
        if _version_key(new.version) > lowest:
            return Failure(
                3910,
                "HY000",
                f"The function '{_SET_PRIMARY}' failed. The appointed primary member has a "
                "version that is greater than the one of some of the members in the group.",
            )
        if self._primary == target:
            return "The requested member is already the current group primary."
        if self._primary is not None:
            old = self._members[self._owner[self._primary]]
            if old.uuid == self._primary:
                old.super_ro = old.read_only = True
                old.brownout_until = None
        self._election_at = None
        self._make_primary(new)
        return "switched"


def _items(text: str) -> list[str]:
    """A select list's items (no nested commas in what the checker sends)."""
    return [i.strip() for i in text.split(",") if i.strip()]


def _variable(variables: Mapping[str, str], item: str) -> str | Failure | None:
    """@@x / @@global.x / @@session.x: booleans as 1/0, as SELECT @@ gives them."""
    name = re.sub(r"^@@(global\.|session\.)?", "", item).split(" ")[0]
    if name not in variables:
        return Failure(1193, "HY000", f"Unknown system variable '{name}'")
    value = variables[name]
    return {"ON": "1", "OFF": "0"}.get(value, value)


def _syntax_error(sql: str) -> Failure:
    return Failure(
        1064, "42000", f"You have an error in your SQL syntax near '{sql[:40]}' (GR model)"
    )
