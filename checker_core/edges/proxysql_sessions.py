"""The client sessions a drain must move, and an older version's lowered auto-increment delay.

A switchover reads which client sessions hold a connection to the writer it moves away from
(stats_mysql_processlist) and says what each will see. It changes no ProxySQL global variable,
on any path. Older versions lowered mysql-auto_increment_delay_multiplex to 0 while the old
writer drained; that is gone, because the value is not the checker's to change:

- it is proxy-wide: lowering it for one cluster's drain changes the traffic of every hostgroup,
  and what it is for (an INSERT's LAST_INSERT_ID() read on the same backend connection) breaks
  for every client of the proxy while it is 0;
- ProxySQL Cluster peers pull a loaded mysql variable and, by default, save it to their disk
  (measured: docs/maintenance.md), so a lowered value spreads beyond the proxy that set it;
- no local record can own a proxy-wide value: a lost state directory, a failed LOAD or a process
  in another pid namespace left the value lowered with nobody to put it back.

What such an older version may have left behind is put right here, from ProxySQL's own tables:
its record (`<checker>.<cluster>.auto_increment_delay`, the value it replaced) is compared with
the staged (global_variables) and the runtime value, with no pid test (pids mean nothing across
pid namespaces, and nothing lowers the value any more). Only the acting pass calls it; every
outcome is one warning, the record stays until the outcome is final, and nothing is ever saved
to ProxySQL's disk.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from checker_core.core.attached import AUTO_INCREMENT_DELAY, AttachedSession, session_of
from checker_core.edges.admin_errors import AdminError

if TYPE_CHECKING:
    from pathlib import Path

    from checker_core.core.model import NodeAddress
    from checker_core.edges.memory import StateStore
    from checker_core.edges.proxysql import AdminClient

PROCESSLIST = (
    "SELECT SessionID, user, cli_host, cli_port, hostgroup, srv_host, srv_port, command, "
    "extended_info FROM stats_mysql_processlist "
    "WHERE hostgroup = %s AND srv_host = %s AND srv_port = %s ORDER BY SessionID"
)
LOWERED_TO = "0"  # what older versions lowered the delay to
# the delay's staged and runtime value, and every mysql-* variable whose two differ
MYSQL_VARIABLES = (
    "SELECT staged.variable_name, staged.variable_value, live.variable_value "
    "FROM global_variables staged "
    "JOIN runtime_global_variables live ON staged.variable_name = live.variable_name "
    "WHERE staged.variable_name LIKE %s "
    "AND (staged.variable_name = %s OR staged.variable_value <> live.variable_value) "
    "ORDER BY staged.variable_name"
)
STAGE = "UPDATE global_variables SET variable_value = %s WHERE variable_name = %s"
LOAD_VARIABLES = "LOAD MYSQL VARIABLES TO RUNTIME"
_OLDER = "an older checker's switchover"


def attached_sessions(
    admin: AdminClient, hostgroup: int, server: NodeAddress
) -> tuple[AttachedSession, ...]:
    """The client sessions holding a connection to `server` in `hostgroup` now."""
    rows = admin.execute(PROCESSLIST, (hostgroup, server.host, server.port))
    found = (session_of(tuple(row)) for row in rows)
    return tuple(s for s in found if s is not None)


def record_path(store: StateStore, cluster: str) -> Path:
    return store.delay_record_path(cluster)


def loads_as(staged: str, live: str) -> bool:
    """Whether a LOAD MYSQL VARIABLES would leave runtime's `live` as it is for this staged
    text. ProxySQL keeps the staged text as typed after a LOAD ('05' stays staged beside a
    runtime 5: measured on 2.7.2 and 3.0.1), reads a number as C's atoi does and a boolean as
    true/1 or false/0 in any case; anything else counts as a change."""
    if staged == live:
        return True
    if live in ("true", "false"):
        meant = {"true": "true", "1": "true", "false": "false", "0": "false"}
        return meant.get(staged.lower()) == live
    if re.fullmatch(r"-?\d+", live):
        leading = re.match(r"\s*([+-]?\d+)", staged)
        return (int(leading.group(1)) if leading else 0) == int(live)
    return False


def put_back_leftover(admin: AdminClient, store: StateStore, cluster: str) -> str | None:
    """An older version's record of the delay it lowered for a switchover: put right from
    ProxySQL's staged and runtime values. Returns the pass line's warning; None when there is
    no record (the usual case: one failed stat)."""
    path = record_path(store, cluster)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        recorded = str(data["value"]).strip()
        if not re.fullmatch(r"\d+", recorded):
            raise ValueError(f"value {recorded!r} is not a number of statements")
        recorded = str(int(recorded))  # as runtime_global_variables shows it
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _dropped(path, f"{path.name}, left by {_OLDER}, unreadable ({exc}): nothing changed")
    try:
        said, done = _reconcile(admin, recorded)
    except AdminError as exc:
        said, done = (
            f"{AUTO_INCREMENT_DELAY} lowered by {_OLDER}: not put back to {recorded} yet "
            f"({exc}); the next pass tries again",
            False,
        )
    return _dropped(path, said) if done else said


def _reconcile(admin: AdminClient, recorded: str) -> tuple[str, bool]:
    """What to say, and whether the record is done with."""
    rows = admin.execute(MYSQL_VARIABLES, ("mysql-%", AUTO_INCREMENT_DELAY))
    pairs = {str(n): (str(s), str(v)) for n, s, v in rows}
    if AUTO_INCREMENT_DELAY not in pairs:
        return f"{AUTO_INCREMENT_DELAY} not found in this ProxySQL: {_OLDER}'s record dropped", True
    staged, live = pairs.pop(AUTO_INCREMENT_DELAY)
    if live == recorded:
        if loads_as(staged, live):
            return f"{AUTO_INCREMENT_DELAY} is {live}, as before {_OLDER}: its record dropped", True
        if loads_as(staged, LOWERED_TO):
            # the older version's UPDATE ran and its LOAD never did: anyone's LOAD would make it
            # live, so the staged value goes back to runtime's, and nothing is loaded
            admin.execute(STAGE, (live, AUTO_INCREMENT_DELAY))
            return (
                f"{AUTO_INCREMENT_DELAY}: the {LOWERED_TO} {_OLDER} staged and never loaded "
                f"set back to {live} in global_variables (nothing loaded)",
                True,
            )
        return (
            f"{AUTO_INCREMENT_DELAY} is {live}, as before {_OLDER}; {staged!r} staged for it "
            "is someone's edit, left as it is",
            True,
        )
    if live != LOWERED_TO:
        return (
            f"{AUTO_INCREMENT_DELAY} is {live}, set by someone since {_OLDER} lowered it: left "
            f"as it is (it was {recorded})",
            True,
        )
    still = (
        f"{AUTO_INCREMENT_DELAY} still {LOWERED_TO}, lowered by {_OLDER}: not put back to "
        f"{recorded}"
    )
    # staged 0 is the lowering, staged `recorded` a put-back whose LOAD failed: both ours
    if not (loads_as(staged, LOWERED_TO) or loads_as(staged, recorded)):
        return f"{still}: {staged!r} is staged for it by someone, for their LOAD", False
    pending = [n for n, (s, v) in sorted(pairs.items()) if not loads_as(s, v)]
    if pending:
        return (
            f"{still}: a LOAD MYSQL VARIABLES would also make the staged, unloaded value of "
            f"{', '.join(pending)} live; the next pass puts it back once they are settled",
            False,
        )
    if staged != recorded:
        admin.execute(STAGE, (recorded, AUTO_INCREMENT_DELAY))
    admin.execute(LOAD_VARIABLES)
    return f"{AUTO_INCREMENT_DELAY} put back to {recorded} ({_OLDER} lowered it to 0)", True


def _dropped(path: Path, said: str) -> str:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        return f"{said}; its record at {path} not removed ({exc}): the next pass tries again"
    return said
