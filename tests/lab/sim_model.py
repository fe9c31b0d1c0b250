"""What a simulated cluster is to the simulated-node server: the contract between the server
(tests/lab/simnodes.py, which speaks the MySQL protocol on one port per node) and a cluster model
(tests/lab/sim_galera.py for Galera, tests/lab/sim_gr.py for Group Replication), which decides what
each node is and answers.

A model is pure: no sockets, no threads, no clock of its own. The server tells it the time
(`advance`, monotonic seconds) before every batch of events, hands it every statement a client
sends to one of its nodes, and asks it whether each node's port listens. The same commands at the
same times give the same answers, which is what lets a seeded schedule replay.

The model also tells the truth about the world (`truth`): what the observer of the simulated
world checks ProxySQL's routing and the checker's words against. Its shape, for both kinds:

    {"kind": "galera" | "gr", "name": str, "changed_at": float (the `now` of the last change),
     "nodes": {"host:port": {
        "process": "running" | "killed" | "frozen" | "joining" | "isolated",
        "identity": str | None,      # gcomm uuid / server_uuid of the running process
        "reach": "LISTEN" | "REFUSED" | "HANG",
        "in_primary": bool,          # a member of the Primary component / the group's majority
        "writable": bool,            # a write sent to it now would commit
        "readable": bool,            # fit to serve reads now
        "evicted": bool,             # its process is on a survivor's eviction list (Galera)
        "needs_restart": bool,       # its process cannot rejoin by itself
        "state": str,                # wsrep_local_state_comment / MEMBER_STATE, as it says it
        "role": str | None,          # GR: PRIMARY / SECONDARY; Galera: None
        "evict_list": [str, ...],    # Galera: this member's wsrep_evs_evict_list; GR: []
        "silenced": bool,            # this process has gone unheard by its peers (frozen,
                                     # cut off from them) at least once: evicting it is fair
     }}}
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol


class Reach(enum.Enum):
    """How a node's address behaves for a client, with the reason."""

    LISTEN = "the process listens and answers"
    REFUSED = "no process listens: connects are refused, open connections are reset"
    HANG = "the process is stopped: connects complete in the kernel, nothing is ever answered"


@dataclass(frozen=True, slots=True)
class Rows:
    """A result set: column labels and rows of text (None for NULL)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]


@dataclass(frozen=True, slots=True)
class Done:
    """An OK packet (a SET, a statement with no result)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """An error packet, as the real server sends it."""

    code: int
    state: str
    message: str


@dataclass(frozen=True, slots=True)
class Stall:
    """No answer yet: the server asks again after the next `advance` (a causal read waiting
    for a silent member, a commit waiting for the group)."""

    reason: str


Answer = Rows | Done | Failure | Stall


class ClusterModel(Protocol):
    """One simulated cluster."""

    kind: str  # "galera" or "gr"
    name: str

    def nodes(self) -> tuple[str, ...]:
        """Every node's address, "host:port", fixed for the model's life."""
        ...

    def advance(self, now: float) -> None:
        """Time has moved on to `now` (monotonic seconds): timeouts fire, joins finish,
        elections end."""
        ...

    def reach(self, node: str) -> Reach:
        """How the node's address behaves now."""
        ...

    def delay_s(self, node: str) -> float:
        """How long the node takes to answer anything now (a slow node); 0 when it is not slow."""
        ...

    def globals(self, node: str) -> tuple[Mapping[str, str], Mapping[str, str]]:
        """The node's global status and variables, spelt as SHOW spells them: the server answers
        SHOW GLOBAL STATUS/VARIABLES and SELECT @@global.x from these."""
        ...

    def statement(self, node: str, session: MutableMapping[str, str], sql: str) -> Answer | None:
        """The answer to one statement sent to the node on a connection whose session
        variables are `session` (the model may keep what a SET SESSION sets there); None
        leaves it to the server's generic answer from `globals` (SHOW, SELECT @@global, an
        unknown statement's OK)."""
        ...

    def command(self, message: Mapping[str, Any]) -> Mapping[str, object]:
        """One control command naming a node of this cluster or the cluster itself (kill,
        restart, freeze, thaw, ...): the reply's fields, or raises ValueError naming what is
        wrong with the message."""
        ...

    def truth(self) -> Mapping[str, object]:
        """The world as it is, JSON-ready, for the observer: see each model's docstring."""
        ...


def sql_words(sql: str) -> str:
    """A statement's text folded for matching: one space between words, lower case, no
    trailing semicolon."""
    return " ".join(sql.strip().rstrip(";").split()).lower()


def control_values(given: object, what: str) -> dict[str, str | None]:
    """A control message's `status` or `variables` object as SHOW spells values: JSON
    true/false are ON/OFF, numbers their decimal text, null removes the name. Raises ValueError
    naming what is wrong."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ValueError(f"{what} is an object of name: value")
    values: dict[str, str | None] = {}
    for name, value in given.items():
        key = str(name).lower()
        if value is None or isinstance(value, str):
            values[key] = value
        elif isinstance(value, bool):
            values[key] = "ON" if value else "OFF"
        elif isinstance(value, int | float):
            values[key] = str(value)
        else:
            raise ValueError(f"{what} {name}: a string, number, boolean or null")
    return values


def apply_values(target: dict[str, str], values: Mapping[str, str | None]) -> None:
    """`control_values`' result applied: a None removes the name."""
    for name, value in values.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
