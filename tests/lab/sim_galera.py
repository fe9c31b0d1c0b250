"""A simulated Galera cluster (a ClusterModel of tests/lab/sim_model.py): one Primary component
with a view of gcomm uuids, each member's process, its own eviction list, and the timings a real
cluster takes to notice a member gone (see /work/shared/reference/galera-eviction.md).

What it keeps, per member: its process (running, killed, frozen, joining, isolated), the gcomm
uuid of that process (a new one on every restart, drawn from the seed), its
wsrep_evs_evict_list, its variables (read_only, pxc_maint_mode, wsrep_reject_queries, ...) and
status overrides, donor/desync, and how slow it answers. Per cluster: the Primary component's view
(uuid -> address), whether it is Primary, its conf_id, and the committed writes per member.

The rules it plays:
- A view entry whose process is killed, frozen or cut off from the others (isolated) is silent:
  every commit and causal read of that view stalls until it is dropped, after killed_leave_s for
  a killed process and suspect_timeout_s for a frozen or isolated one, or view_change_s after an
  `evs.evict` of its uuid.
- A view that loses a majority of itself at once (Galera's quorum: strictly more than half must
  remain) makes the remaining members non-Primary; members coming back restore it.
- `evs.evict=<uuid>` lists the uuid on the asking member at once and on every Primary member
  after view_change_s, and the uuid leaves the view then; an evicted process never rejoins (it
  needs a restart, under a new uuid). `evs.evict=` empties the asking member's own list.
- A restarted process enters the view (its port still closed) after view_change_s, opens its port
  after join_s as Joined, and is Synced joined_s later.
- A frozen member thawed, or an isolated one rejoined, after it was dropped is non-Primary alone,
  then rejoins under the same uuid after join_s unless that uuid is evicted.

Commands (JSON objects with "cmd" and "node" = "host:port", or "cluster" for configure):
kill, restart, freeze, thaw, slow (delay_ms), cut, uncut, isolate, rejoin, donor, undonor,
desync (on), set (variables, status: null removes), configure (the timing parameters).
"""

from __future__ import annotations

import enum
import math
import random
import re
import uuid as uuidlib
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from tests.lab.sim_model import (
    Answer,
    Done,
    Failure,
    Reach,
    Rows,
    Stall,
    apply_values,
    control_values,
    sql_words,
)

NON_PRIMARY_CONF_ID: Final = "18446744073709551615"  # Galera's conf_id of a non-Primary view
NOT_READY: Final = Failure(1047, "08S01", "WSREP has not yet prepared node for application use")
READ_ONLY: Final = Failure(
    1290,
    "HY000",
    "The MariaDB server is running with the --read-only option so it cannot execute this statement",
)
PARAMETERS: Final = (
    "suspect_timeout_s",
    "killed_leave_s",
    "join_s",
    "view_change_s",
    "joined_s",
    "check_s",
)
_EVICT = re.compile(
    r"\s*set\s+(?:global\s+|@@global\.)wsrep_provider_options\s*=\s*(['\"])(.*)\1\s*;?\s*",
    re.I | re.S,
)
_WRITES: Final = ("insert", "update", "delete", "replace")
_MEMBER_QUERIES: Final = {
    "select node_uuid, node_incoming_address from mysql.wsrep_cluster_members": (
        "node_uuid",
        "node_incoming_address",
    ),
    "select uuid, host_name from performance_schema.pxc_cluster_view": ("UUID", "HOST_NAME"),
}
_ON: Final = frozenset({"ON", "1", "TRUE", "YES"})


class Process(enum.Enum):
    """What a member's mysqld is doing, with the reason."""

    RUNNING = "running: the process answers and talks to its peers"
    KILLED = "killed: no process, the port refuses"
    FROZEN = "frozen: stopped (SIGSTOP), connects hang, its peers hear nothing"
    JOINING = "joining: on its way into the view (its port closed after a restart)"
    ISOLATED = "isolated: running, cut off from its peers by the network"


@dataclass(slots=True)
class _Member:
    address: str
    uuid: str
    variables: dict[str, str]
    process: Process = Process.RUNNING
    port_open: bool = True
    evict_list: list[str] = field(default_factory=list)
    status: dict[str, str] = field(default_factory=dict)  # overrides of the computed status
    synced_at: float | None = None  # when a Joined member becomes Synced
    join_at: float | None = None  # when a joining member enters the view (or tries to)
    open_at: float | None = None  # when a restarted member opens its port
    needs_restart: bool = False
    donor: bool = False
    delay_s: float = 0.0
    cut: bool = False
    commits: int = 0
    # this process (this uuid) has gone unheard by its peers at least once: only such a
    # process may fairly be evicted
    silenced: bool = False


@dataclass(slots=True)
class _Entry:
    """One process in the Primary component's view."""

    address: str
    leave_at: float | None = None  # when its peers drop it (it went silent)


class GaleraCluster:
    """One simulated Galera cluster; see the module's docstring."""

    kind = "galera"

    def __init__(
        self,
        name: str,
        addresses: tuple[str, ...],
        seed: int,
        *,
        suspect_timeout_s: float = 3.0,  # the lab's evs.suspect_timeout
        # a killed process's peers get TCP resets on its gcomm connections, which speeds their
        # detection well below suspect_timeout; not measured here, so a round second
        killed_leave_s: float = 1.0,
        join_s: float = 2.0,  # an IST: the port stays closed this long after a restart
        view_change_s: float = 0.5,  # galera-eviction.md: an eviction took ~0.5 s to a new view
        joined_s: float = 0.2,  # Joined before Synced
        check_s: float = 0.5,  # the lab's evs.inactive_check_period
    ) -> None:
        if not addresses:
            raise ValueError("a cluster has at least one node")
        self.name = name
        self._rng = random.Random(seed)
        self.suspect_timeout_s = suspect_timeout_s
        self.killed_leave_s = killed_leave_s
        self.join_s = join_s
        self.view_change_s = view_change_s
        self.joined_s = joined_s
        self.check_s = check_s
        self.state_uuid = self._new_uuid()
        self.now = 0.0
        self.changed_at = 0.0
        self.members: dict[str, _Member] = {
            a: _Member(a, self._new_uuid(), _default_variables()) for a in addresses
        }
        self.view: dict[str, _Entry] = {m.uuid: _Entry(a) for a, m in self.members.items()}
        self.primary = True
        self.last_primary_size = len(self.view)
        self.conf_id = len(addresses)
        # evictions under way: (when they reach every Primary member, uuid)
        self.evictions: list[tuple[float, str]] = []

    def _new_uuid(self) -> str:
        return str(uuidlib.UUID(int=self._rng.getrandbits(128), version=4))

    # -- the contract ---------------------------------------------------------------------

    def nodes(self) -> tuple[str, ...]:
        return tuple(self.members)

    def next_due(self) -> float | None:
        """The monotonic time of the next timed transition, None when nothing is pending (the
        server ticks only while something is)."""
        times = [at for at, _ in self.evictions]
        times += [e.leave_at for e in self.view.values() if e.leave_at is not None]
        for m in self.members.values():
            times += [t for t in (m.synced_at, m.join_at, m.open_at) if t is not None]
        return min(times) if times else None

    def advance(self, now: float) -> None:
        self.now = max(self.now, now)
        # bounded: each round settles at least one due transition
        for _ in range(1000):
            if not self._step():
                return

    def _step(self) -> bool:
        """The earliest transition due by now, done at its own time (what it schedules counts
        from then, so one long advance ends where many short ones would); False when none."""
        due: list[tuple[float, int, Callable[[float], None]]] = []
        for at, uuid in self.evictions:
            due.append((at, 0, partial(self._spread_eviction, uuid)))
        for e in self.view.values():
            if e.leave_at is not None:
                due.append((e.leave_at, 1, self._drop_silent))
        for m in self.members.values():
            if m.open_at is not None:
                due.append((m.open_at, 2, partial(self._open, m)))
            if m.join_at is not None:
                due.append((m.join_at, 3, partial(self._join, m)))
            if m.synced_at is not None:
                due.append((m.synced_at, 4, partial(self._synced, m)))
        if not due:
            return False
        at, _, transition = min(due, key=lambda d: (d[0], d[1]))
        if at > self.now:
            return False
        transition(at)
        return True

    def reach(self, node: str) -> Reach:
        m = self._member(node)
        if m.process is Process.KILLED or not m.port_open:
            return Reach.REFUSED
        if m.process is Process.FROZEN or m.cut:
            return Reach.HANG
        return Reach.LISTEN

    def delay_s(self, node: str) -> float:
        return self._member(node).delay_s

    def globals(self, node: str) -> tuple[Mapping[str, str], Mapping[str, str]]:
        m = self._member(node)
        view = self._own_view(m)
        primary = self.in_primary(m)
        disconnected = m.needs_restart
        state, comment = self._state(m)
        status = {
            "wsrep_cluster_status": (
                "Disconnected" if disconnected else "Primary" if primary else "non-Primary"
            ),
            "wsrep_ready": "ON" if primary else "OFF",
            "wsrep_connected": "OFF" if disconnected else "ON",
            "wsrep_local_state": state,
            "wsrep_local_state_comment": comment,
            "wsrep_local_recv_queue": "0",
            "wsrep_cluster_size": str(0 if disconnected else len(view)),
            "wsrep_cluster_state_uuid": self.state_uuid,
            "wsrep_cluster_conf_id": str(self.conf_id) if primary else NON_PRIMARY_CONF_ID,
            "wsrep_gcomm_uuid": m.uuid,
            "wsrep_evs_evict_list": ",".join(m.evict_list),
        }
        status.update(m.status)
        variables = dict(m.variables)
        variables["wsrep_desync"] = m.variables.get("wsrep_desync", "OFF")
        variables["wsrep_provider_options"] = (
            f"evs.suspect_timeout = PT{self.suspect_timeout_s:g}S; gcache.size = 128M"
        )
        return status, variables

    def statement(self, node: str, session: MutableMapping[str, str], sql: str) -> Answer | None:
        m = self._member(node)
        words = sql_words(sql)
        if (evict := _EVICT.fullmatch(sql)) is not None:
            return self._provider_options(m, evict.group(2))
        if words.startswith("set session wsrep_sync_wait") or words.startswith(
            "set wsrep_sync_wait"
        ):
            session["wsrep_sync_wait"] = words.rpartition("=")[2].strip()
            return Done()
        if words in _MEMBER_QUERIES:
            columns = _MEMBER_QUERIES[words]
            return Rows(columns, tuple((u, a) for u, a in self._own_view(m).items()))
        first = words.split(" ", 1)[0]
        if first in _WRITES or first == "commit":
            return self._write(m, count=first in _WRITES)
        if first == "select" and session.get("wsrep_sync_wait", "0") not in ("0", ""):
            if "@@" in words or "global_status" in words:
                return None
            if not self.in_primary(m) or self._rejecting(m):
                return NOT_READY
            stalled = self._silent_in_view(m)
            if stalled:
                return Stall(f"causal read waits for silent {stalled}")
            return None
        return None

    def command(self, message: Mapping[str, Any]) -> Mapping[str, object]:
        cmd = message.get("cmd")
        if cmd == "configure":
            return self._configure(message)
        handler = _COMMANDS.get(str(cmd))
        if handler is None:
            raise ValueError(f"unknown command {cmd!r} for a Galera model")
        node = message.get("node")
        if not isinstance(node, str) or node not in self.members:
            raise ValueError(f"{cmd}: name one node of {self.name} as host:port, not {node!r}")
        m = self.members[node]
        reply = handler(self, m, message)
        self._changed()
        return reply or {}

    def truth(self) -> Mapping[str, object]:
        primary_lists = [
            set(m.evict_list) for m in self.members.values() if self.in_primary(m)
        ] or [set()]
        nodes: dict[str, object] = {}
        for address, m in self.members.items():
            _, variables = self.globals(address)
            running = m.process is Process.RUNNING
            synced = running and self._state(m)[0] == "4"
            donor_reads = (
                running
                and self._state(m)[0] == "2"
                and variables.get("wsrep_sst_donor_rejects_queries", "OFF").upper() not in _ON
            )
            primary = self.in_primary(m)
            rejecting = self._rejecting(m)
            # pxc_maint_mode: the operator asked for no traffic, reads included
            maintained = variables.get("pxc_maint_mode", "DISABLED").upper() != "DISABLED"
            nodes[address] = {
                "process": m.process.name.lower(),
                "identity": None if m.process is Process.KILLED else m.uuid,
                "reach": self.reach(address).name,
                "in_primary": primary,
                "writable": synced
                and primary
                and not _on(variables.get("read_only"))
                and not rejecting
                and not maintained,
                "readable": (synced or donor_reads)
                and primary
                and not rejecting
                and not maintained,
                "evicted": any(m.uuid in listed for listed in primary_lists),
                "needs_restart": m.needs_restart or m.process is Process.KILLED,
                "state": self._state(m)[1],
                "role": None,
                "evict_list": list(m.evict_list),
                "silenced": m.silenced,
            }
        return {
            "kind": self.kind,
            "name": self.name,
            "changed_at": self.changed_at,
            "nodes": nodes,
            # beyond sim_model's shape: the Primary component and the writes each member committed
            "primary": self.primary,
            "view": dict((u, e.address) for u, e in self.view.items()),
            "conf_id": self.conf_id,
            "commits": {a: m.commits for a, m in self.members.items()},
        }

    # -- what a member sees ---------------------------------------------------------------

    def _member(self, node: str) -> _Member:
        try:
            return self.members[node]
        except KeyError:
            raise ValueError(f"no node {node!r} in {self.name}") from None

    def _in_view(self, m: _Member) -> bool:
        """The member's process is in the component's view and hears it."""
        return (
            m.uuid in self.view
            and m.process in (Process.RUNNING, Process.FROZEN)
            and not m.needs_restart
        )

    def in_primary(self, m: _Member) -> bool:
        return self.primary and self._in_view(m)

    def _own_view(self, m: _Member) -> dict[str, str]:
        if self._in_view(m):
            return {u: e.address for u, e in self.view.items()}
        return {m.uuid: m.address}

    def _state(self, m: _Member) -> tuple[str, str]:
        if not self.in_primary(m):
            return "0", "Initialized"
        if m.synced_at is not None:
            return "3", "Joined"
        if m.donor or _on(m.variables.get("wsrep_desync")):
            return "2", "Donor/Desynced"
        return "4", "Synced"

    def _silent(self, uuid: str) -> bool:
        entry = self.view[uuid]
        m = self.members[entry.address]
        # an older process of that address is dead; a joiner is silent only if frozen
        return m.uuid != uuid or m.process in (Process.KILLED, Process.FROZEN, Process.ISOLATED)

    def _silent_in_view(self, m: _Member) -> str:
        """The silent members of the view `m` is in ('' when none)."""
        if not self._in_view(m):
            return ""
        return ", ".join(self.view[u].address for u in self.view if self._silent(u))

    def _rejecting(self, m: _Member) -> bool:
        return m.variables.get("wsrep_reject_queries", "NONE").upper() != "NONE"

    def _write(self, m: _Member, *, count: bool) -> Answer:
        if not self.in_primary(m) or self._state(m)[0] != "4" or self._rejecting(m):
            return NOT_READY
        if _on(m.variables.get("read_only")) or _on(m.variables.get("super_read_only")):
            return READ_ONLY
        stalled = self._silent_in_view(m)
        if stalled:
            return Stall(f"commit waits for silent {stalled}")
        if count:
            m.commits += 1
        return Done()

    def _provider_options(self, m: _Member, value: str) -> Answer:
        for option in value.split(";"):
            key, sep, given = option.partition("=")
            if key.strip().lower() != "evs.evict" or not sep:
                continue
            target = given.strip()
            if target == m.uuid:
                # a member never evicts itself (the checker asks the others)
                continue
            if not target:
                m.evict_list.clear()
            elif self.in_primary(m):
                if target not in m.evict_list:
                    m.evict_list.append(target)
                self.evictions.append((self.now + self.view_change_s, target))
            # a member outside the Primary component takes the option and keeps nothing: the
            # model's simplification (the checker asks Primary survivors only)
            self._changed()
        return Done()

    # -- transitions ----------------------------------------------------------------------

    def _changed(self) -> None:
        self.changed_at = self.now

    def _open(self, m: _Member, at: float) -> None:
        m.open_at = None
        m.port_open = True
        if m.process is Process.JOINING and m.uuid in self.view:
            # the state transfer is over: Joined, then Synced
            m.process = Process.RUNNING
            m.synced_at = at + self.joined_s
        self._changed()

    def _synced(self, m: _Member, at: float) -> None:
        m.synced_at = None
        self._changed()

    def _spread_eviction(self, uuid: str, at: float) -> None:
        self.evictions.remove((at, uuid))
        for m in self.members.values():
            if self.in_primary(m) and uuid not in m.evict_list:
                m.evict_list.append(uuid)
        for m in self.members.values():
            if m.uuid == uuid:
                # evicted for good: it never rejoins under this uuid
                self._shut_out(m)
        if uuid in self.view:
            self._drop([uuid])
        self._changed()

    def _drop_silent(self, at: float) -> None:
        """Every member whose silence ran out by `at` leaves in one view change."""
        self._drop([u for u, e in self.view.items() if e.leave_at is not None and e.leave_at <= at])

    def _drop(self, uuids: list[str]) -> None:
        before = len(self.view)
        for u in uuids:
            self.view.pop(u, None)
        self.conf_id += 1
        if self.primary and 2 * len(self.view) <= before:
            # the survivors no longer hold a majority of the last Primary view
            self.primary = False
        elif self.primary:
            self.last_primary_size = len(self.view)
        self._changed()

    def _join(self, m: _Member, at: float) -> None:
        """The member tries to enter the component (after a restart, a thaw, a rejoin)."""
        m.join_at = None
        if m.process is not Process.JOINING:
            return
        if m.needs_restart or any(m.uuid in o.evict_list for o in self._listers()):
            self._shut_out(m)
            self._changed()
            return
        self.view[m.uuid] = _Entry(m.address)
        self.conf_id += 1
        if not self.primary and 2 * len(self.view) > self.last_primary_size:
            self.primary = True
        if self.primary:
            self.last_primary_size = len(self.view)
        if m.port_open:
            m.process = Process.RUNNING
            m.synced_at = at + self.joined_s
        # else: still receiving its state transfer, port closed, until open_at
        self._changed()

    def _shut_out(self, m: _Member) -> None:
        """Its uuid is evicted: a joiner still in its state transfer aborts (mysqld exits); a
        process that was already up stays up, disconnected, until it is restarted."""
        m.join_at = m.synced_at = None
        if m.process is Process.KILLED:
            return
        if m.process is Process.JOINING and not m.port_open:
            m.process = Process.KILLED
            m.open_at = None
            return
        m.needs_restart = True
        if m.process is Process.JOINING:
            m.process = Process.RUNNING

    def _listers(self) -> list[_Member]:
        """The members whose eviction lists a joiner must pass: those of the component."""
        return [o for o in self.members.values() if self._in_view(o)]

    def _go_silent(self, m: _Member, after_s: float) -> None:
        entry = self.view.get(m.uuid)
        if entry is not None:
            at = self.now + after_s
            if self.check_s > 0:
                # peers look for silent members every check_s, so members gone silent about
                # together leave in one view change (which decides the quorum)
                at = math.ceil(round(at / self.check_s, 6)) * self.check_s
            entry.leave_at = at if entry.leave_at is None else min(entry.leave_at, at)

    def _heard_again(self, m: _Member) -> bool:
        """The member is back; True when it was still in the view (its drop is called off)."""
        entry = self.view.get(m.uuid)
        if entry is None:
            return False
        entry.leave_at = None
        return True

    # -- commands -------------------------------------------------------------------------

    def _kill(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        if m.process is Process.KILLED:
            return {"already": True}
        m.process = Process.KILLED
        m.port_open = False
        m.join_at = m.open_at = m.synced_at = None
        m.donor = False
        self._go_silent(m, self.killed_leave_s)
        return None

    def _restart(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        old = m.uuid
        if m.process in (Process.RUNNING, Process.JOINING) and m.uuid in self.view:
            # a clean shutdown: it leaves the view at once, no quorum lost
            self.view.pop(m.uuid)
            self.conf_id += 1
            if self.primary:
                self.last_primary_size = len(self.view)
        elif m.process is not Process.KILLED:
            self._go_silent(m, self.killed_leave_s)  # frozen or cut off: killed by the restart
        m.uuid = self._new_uuid()
        m.process = Process.JOINING
        m.port_open = False
        m.needs_restart = m.donor = m.cut = m.silenced = False
        m.variables["wsrep_desync"] = "OFF"
        m.synced_at = None
        m.join_at = self.now + min(self.view_change_s, self.join_s)
        m.open_at = self.now + self.join_s
        return {"old_uuid": old, "uuid": m.uuid}

    def _freeze(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        if m.process is not Process.RUNNING:
            raise ValueError(f"freeze: {m.address} is {m.process.name.lower()}, not running")
        m.process = Process.FROZEN
        m.silenced = True
        self._go_silent(m, self.suspect_timeout_s)
        return None

    def _thaw(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        if m.process is not Process.FROZEN:
            raise ValueError(f"thaw: {m.address} is {m.process.name.lower()}, not frozen")
        if self._heard_again(m) or m.needs_restart:
            m.process = Process.RUNNING
            return None
        # dropped while it slept: non-Primary alone, then it tries to rejoin
        m.process = Process.JOINING
        m.join_at = self.now + self.join_s
        return None

    def _isolate(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        if m.process is not Process.RUNNING:
            raise ValueError(f"isolate: {m.address} is {m.process.name.lower()}, not running")
        m.process = Process.ISOLATED
        m.silenced = True
        self._go_silent(m, self.suspect_timeout_s)
        return None

    def _rejoin(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        if m.process is not Process.ISOLATED:
            raise ValueError(f"rejoin: {m.address} is {m.process.name.lower()}, not isolated")
        if self._heard_again(m):
            # healed before its peers gave up on it: it never left their view
            m.process = Process.RUNNING
            return None
        m.process = Process.JOINING
        m.join_at = self.now + self.join_s
        return None

    def _slow(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        delay = message.get("delay_ms", 0)
        if not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0:
            raise ValueError("slow: delay_ms is a number of milliseconds, 0 or more")
        m.delay_s = float(delay) / 1000
        return None

    def _cut(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        m.cut = message.get("cmd") == "cut"
        return None

    def _donor(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        m.donor = message.get("cmd") == "donor"
        return None

    def _desync(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        on = message.get("on", True)
        if not isinstance(on, bool):
            raise ValueError("desync: on is true or false")
        m.variables["wsrep_desync"] = "ON" if on else "OFF"
        return None

    def _set(self, m: _Member, message: Mapping[str, Any]) -> Mapping[str, object] | None:
        updates = {
            key: control_values(message.get(key), f"set: {key}") for key in ("variables", "status")
        }
        if "mode" in message:
            raise ValueError("set: a model node has no mode; kill, freeze or cut it")
        for key, values in updates.items():
            apply_values(m.variables if key == "variables" else m.status, values)
        return None

    def _configure(self, message: Mapping[str, Any]) -> Mapping[str, object]:
        given = {k: v for k, v in message.items() if k in PARAMETERS}
        unknown = set(message) - set(PARAMETERS) - {"cmd", "cluster", "node", "id"}
        if unknown:
            raise ValueError(f"configure: unknown {', '.join(sorted(unknown))}")
        for key, value in given.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"configure: {key} is a number of seconds, 0 or more")
        for key, value in given.items():
            setattr(self, key, float(value))
        self._changed()
        return {k: getattr(self, k) for k in PARAMETERS}


_COMMANDS: Final = {
    "kill": GaleraCluster._kill,
    "restart": GaleraCluster._restart,
    "freeze": GaleraCluster._freeze,
    "thaw": GaleraCluster._thaw,
    "isolate": GaleraCluster._isolate,
    "rejoin": GaleraCluster._rejoin,
    "slow": GaleraCluster._slow,
    "cut": GaleraCluster._cut,
    "uncut": GaleraCluster._cut,
    "donor": GaleraCluster._donor,
    "undonor": GaleraCluster._donor,
    "desync": GaleraCluster._desync,
    "set": GaleraCluster._set,
}


def _on(value: str | None) -> bool:
    return value is not None and value.strip().upper() in _ON


def _default_variables() -> dict[str, str]:
    return {
        "read_only": "OFF",
        "super_read_only": "OFF",
        "wsrep_reject_queries": "NONE",
        "wsrep_sst_donor_rejects_queries": "OFF",
        "wsrep_desync": "OFF",
        "pxc_maint_mode": "DISABLED",
        "wsrep_on": "ON",
        # MariaDB's default: what tells a probe its status pairs were not cut short
        "group_concat_max_len": "1048576",
    }
