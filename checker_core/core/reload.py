"""What a daemon's reload changes: which clusters' loops go on untouched, which stop, which
start anew. Pure: two Settings in, a ReloadPlan out.

A cluster is unchanged when its own ClusterSettings are equal and no setting every runner reads
changed (SHARED_KEYS). A changed shared setting restarts every cluster's loop; any other change
restarts only the clusters whose own settings changed, and stops those no longer configured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from checker_core.core.settings import Settings

# the settings outside [[cluster]] that a cluster's runner, prober, watch or state store reads:
# a change to any of them restarts every cluster's loop. The rest of [run] is read once by the
# process (log_format, log_level, log_stream: at start only) or by the daemon around the loops
# (metrics_listen: the listener is moved, the loops go on).
SHARED_KEYS: tuple[tuple[str, Callable[[Settings], object]], ...] = (
    ("[proxysql]", lambda s: s.proxysql),
    ("[monitor]", lambda s: s.monitor),
    ("[node_admin]", lambda s: s.node_admin),
    ("run.interval_ms", lambda s: s.run.interval_ms),
    ("run.max_runtime_ms", lambda s: s.run.max_runtime_ms),
    ("run.watch_interval_ms", lambda s: s.run.watch_interval_ms),
    ("run.state_dir", lambda s: s.run.state_dir),
    ("run.persist", lambda s: s.run.persist),
    # the state store reads the old switch for every cluster `<checker>.all.paused` only while
    # no cluster is named `all`
    ("a cluster named `all`", lambda s: any(c.name == "all" for c in s.clusters)),
)


@dataclass(frozen=True, slots=True)
class ReloadPlan:
    """`keep`: loops that go on untouched; `stop`: loops that end (removed or changed); `start`:
    loops made anew (added or changed); `shared`: the shared settings that changed (every
    cluster restarts when not empty)."""

    keep: tuple[str, ...]
    stop: tuple[str, ...]
    start: tuple[str, ...]
    shared: tuple[str, ...] = ()

    @property
    def changed(self) -> tuple[str, ...]:
        """Clusters stopped and started again: their settings (or shared ones) changed."""
        return tuple(name for name in self.start if name in self.stop)

    def describe(self) -> str:
        parts = []
        if self.shared:
            parts.append(f"{', '.join(self.shared)} changed: every cluster restarted")
        for label, names in (
            ("unchanged", self.keep),
            ("restarted", self.changed),
            ("added", tuple(n for n in self.start if n not in self.stop)),
            ("removed", tuple(n for n in self.stop if n not in self.start)),
        ):
            if names and not (self.shared and label == "restarted"):
                parts.append(f"{label}: {', '.join(names)}")
        return "; ".join(parts) or "no cluster"


def plan_reload(running: Settings, wanted: Settings) -> ReloadPlan:
    """The loops a reload from `running` to `wanted` keeps, stops and starts; in each list the
    clusters keep their configured order."""
    shared = tuple(name for name, read in SHARED_KEYS if read(running) != read(wanted))
    before = {c.name: c for c in running.clusters}
    after = {c.name: c for c in wanted.clusters}
    keep = () if shared else tuple(n for n in after if before.get(n) == after[n])
    return ReloadPlan(
        keep=keep,
        stop=tuple(n for n in before if n not in keep),
        start=tuple(n for n in after if n not in keep),
        shared=shared,
    )
