"""How a runner reaches ProxySQL and the nodes, and the clocks it reads: given when it is made,
never set afterwards, the same for every runner of a fleet (tests give fakes here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from checker_core.edges.proxysql import AdminClient

if TYPE_CHECKING:
    from checker_core.core.settings import Settings
    from checker_core.edges.backend import Prober
    from checker_core.edges.deadline import Deadline


def open_admin(settings: Settings, deadline: Deadline | None) -> AdminClient:
    """A connection to the admin of `settings`' ProxySQL, within `deadline` when given."""
    return AdminClient.connect(settings.proxysql, deadline)


@dataclass(frozen=True, slots=True)
class Ports:
    """`connect_admin` opens a connection to ProxySQL's admin (within a pass's deadline, when
    given one); `new_prober` makes the prober of a runner's settings (None: the checker kind's
    own); `clock` times what a pass keeps (drains, streaks, queue samples) and `monotonic` its
    own deadlines: both monotonic, so a wall-clock step never stretches a drain or a
    hysteresis."""

    connect_admin: Callable[[Settings, Deadline | None], AdminClient] = open_admin
    new_prober: Callable[[Settings], Prober] | None = None
    clock: Callable[[], float] = time.monotonic
    monotonic: Callable[[], float] = time.monotonic
