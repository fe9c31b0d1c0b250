"""What passes remember between runs: hysteresis counters and the pause switch (rule S4, S5).

One JSON state file per checker and cluster, replaced atomically (write, fsync, rename), so a
pass killed at any point leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from checker_core.core.hysteresis import NodeMemory
from checker_core.core.leadership import ProxyAddress
from checker_core.core.model import NodeAddress
from checker_core.core.schema import Checker

if TYPE_CHECKING:
    from checker_core.core.leadership import PeerMemory


def unwritable(
    state_dir: Path, locks: Collection[Path], access: Callable[[Path, int], bool] = os.access
) -> str | None:
    """Why an applying pass could not create or write its lock file, if it could not, asked of
    the filesystem without writing anything (check-config changes nothing): the directory
    itself, or while it is missing the nearest parent that exists, must let this user create
    files in it, and a lock file already there must open for writing. `access` is os.access:
    it knows what the mode bits do not say (root's rights, a read-only mount, an immutable
    directory)."""
    where = state_dir
    while not where.exists() and where.parent != where:
        where = where.parent
    denied: Path | None = None
    if where.is_dir() and not access(where, os.W_OK | os.X_OK):
        denied = where
    else:
        held = [lock for lock in locks if lock.exists() and not access(lock, os.R_OK | os.W_OK)]
        denied = held[0] if held else None
    if denied is None:
        return None
    return (
        f"run.state_dir {state_dir}: cannot create or write its lock file ({denied} is not "
        "writable by this user)"
    )


class StateStore:
    def __init__(self, state_dir: Path, checker: Checker, clusters: Collection[str] = ()) -> None:
        self.state_dir = state_dir
        self.checker = checker
        # before the all-clusters switch had a name of its own it was `<checker>.all.paused`,
        # which a cluster named `all` also uses: that old file still pauses every cluster, unless
        # a cluster of this configuration is named `all` (then it is that cluster's)
        self._old_all_switch = "all" not in clusters
        # each state file as this process last read or wrote it, with what it held: a file
        # still the same is neither parsed again nor rewritten with the same content
        self._known: dict[Path, tuple[FileId, object]] = {}
        # counters a save could not write, kept for this process's next pass
        self._unsaved: dict[Path, dict[NodeAddress, NodeMemory]] = {}
        self._owed: set[str] = set()  # clusters whose SAVE this process owes
        self._paths: dict[tuple[str, str], Path] = {}
        self._dir_made = False

    def ensure_dir(self) -> None:
        # asked before every pass of a daemon: made once, again only when it went missing
        if self._dir_made and self.state_dir.is_dir():
            return
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        self._dir_made = True

    def _path(self, cluster: str, suffix: str) -> Path:
        # the same few paths every pass of a daemon: each made once
        key = (cluster, suffix)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = self.state_dir / f"{self.checker.value}.{cluster}.{suffix}"
        return path

    def state_path(self, cluster: str) -> Path:
        return self._path(cluster, "state.json")

    def lock_path(self, cluster: str) -> Path:
        return self._path(cluster, "lock")

    def write_lock_path(self, host: str, port: int) -> Path:
        """The write lock of the ProxySQL at host:port: no checker's name in it, so that
        galera-checker and gr-checker sharing this state dir share it too."""
        return self.state_dir / f"proxysql.{host}_{port}.write.lock"

    def evict_lock_path(self, cluster: str) -> Path:
        """The lock of the cluster's evictions done off its pass: one process at a time evicts,
        while the pass's own lock stays free for the next pass."""
        return self._path(cluster, "evict.lock")

    def delay_record_path(self, cluster: str) -> Path:
        """An older version's record of the auto-increment delay it lowered for a switchover
        (edges/proxysql_sessions.py puts it right)."""
        return self._path(cluster, "auto_increment_delay")

    def pause_path(self, cluster: str | None) -> Path:
        """`<checker>.paused` for every cluster: no cluster name can make that name."""
        if cluster is None:
            return self.state_dir / f"{self.checker.value}.paused"
        return self._path(cluster, "paused")

    def _pause_paths(self, cluster: str | None) -> tuple[Path, ...]:
        """The files that are this switch: the all-clusters one may still be under its old name."""
        if cluster is None and self._old_all_switch:
            return self.pause_path(None), self._path("all", "paused")
        return (self.pause_path(cluster),)

    # ------------------------------------------------------------ counters

    def load(self, cluster: str) -> tuple[dict[NodeAddress, NodeMemory], str | None]:
        """The remembered nodes, and a warning when the file was unreadable (then: start afresh)."""
        path = self.state_path(cluster)
        unsaved = self._unsaved.get(path)
        if unsaved is not None:
            return dict(unsaved), None  # what the last pass could not write: still this process's
        try:
            file_id = _file_id(path)
            known = self._known.get(path)
            if known is not None and known[0] == file_id and isinstance(known[1], dict):
                return dict(known[1]), None  # the daemon's steady case: unchanged since last pass
            data = json.loads(path.read_text(encoding="utf-8"))
            nodes = {
                _node(key): NodeMemory.from_json(value)
                for key, value in data.get("nodes", {}).items()
            }
            if not _same_clock(data.get("clock")):
                # times of another boot's monotonic clock, or an older version's wall clock:
                # drains start their clock again, streaks count probes only
                nodes = {node: kept.without_times() for node, kept in nodes.items()}
        except FileNotFoundError:
            return {}, None
        except (OSError, ValueError, TypeError, AttributeError, AssertionError) as exc:
            return {}, f"state file {path} unreadable ({exc}); counters start afresh"
        self._known[path] = (file_id, nodes)
        return dict(nodes), None

    def save(self, cluster: str, nodes: Mapping[NodeAddress, NodeMemory]) -> str | None:
        """Write the counters, unless the file already holds exactly these (a steady pass, a new
        process every interval under the scheduler, need not rewrite and fsync it).

        A file that cannot be written is no failure of the pass: the reason comes back to be
        reported, the counters are kept for this process's next pass (the daemon's), and the
        next save tries the file again.
        """
        path = self.state_path(cluster)
        if self._unchanged(path, nodes):
            return None
        payload = {
            "version": 1,
            "clock": _clock(),
            "nodes": {str(n): m.to_json() for n, m in sorted(nodes.items())},
        }
        try:
            self._write(path, payload, dict(nodes))
        except OSError as exc:
            self._unsaved[path] = dict(nodes)
            return f"state file {path} not saved ({exc.strerror or exc}); retried next pass"
        self._unsaved.pop(path, None)
        return None

    # ------------------------------------------------------------ ProxySQL Cluster peers

    def peers_path(self, me: ProxyAddress) -> Path:
        return self.state_dir / f"{self.checker.value}.peers.{me.host}_{me.port}.json"

    def load_peers(self, me: ProxyAddress) -> PeerMemory:
        """What this checker saw of its proxy's peers; nothing (first look) when unreadable."""
        from checker_core.core.leadership import PeerMemory  # only a proxy with peers needs it

        path = self.peers_path(me)
        try:
            file_id = _file_id(path)
            data = json.loads(path.read_text(encoding="utf-8"))
            since = {_node(k): float(v) for k, v in data["alive_since"].items()}
            gone = {_node(k): float(v) for k, v in data.get("gone", {}).items()}
            acting = data.get("acting")
            minority = bool(data.get("minority", False))
            checked = data.get("checked_at")
            memory = PeerMemory(
                since,
                _node(acting) if acting else None,
                True,
                minority,
                gone,
                None if checked is None else float(checked),
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return PeerMemory()
        self._known[path] = (file_id, memory)
        return memory

    def save_peers(self, me: ProxyAddress, memory: PeerMemory) -> None:
        """Best effort: a scheduler pass that cannot write it starts its peer view afresh."""
        path = self.peers_path(me)
        if self._unchanged(path, memory):
            return
        payload = {
            "version": 1,
            "acting": str(memory.acting) if memory.acting else None,
            "minority": memory.minority,
            "alive_since": {str(a): t for a, t in sorted(memory.alive_since.items())},
            "gone": {str(a): t for a, t in sorted(memory.gone.items())},
            "checked_at": memory.checked_at,
        }
        with contextlib.suppress(OSError):
            self._write(path, payload, memory)

    def _unchanged(self, path: Path, value: object) -> bool:
        """The file is still as this process last read or wrote it, and held `value`."""
        known = self._known.get(path)
        if known is None or known[1] != value:
            return False
        try:
            return _file_id(path) == known[0]
        except OSError:
            return False  # gone or unreadable: to be written again

    def _write(self, path: Path, payload: Mapping[str, object], value: object) -> None:
        self.ensure_dir()
        atomic_write(path, json.dumps(payload, indent=1, sort_keys=True))
        self._known[path] = (_file_id(path), value)

    # ------------------------------------------------------------ a SAVE that failed

    def save_owed_path(self, cluster: str) -> Path:
        return self._path(cluster, "save-owed")

    def save_owed(self, cluster: str) -> bool:
        """A LOAD went live but its SAVE ... TO DISK failed: disk is behind runtime, and a
        ProxySQL restart would bring the old rows back until a SAVE succeeds."""
        return cluster in self._owed or self.save_owed_path(cluster).exists()

    def owe_save(self, cluster: str, owed: bool) -> str | None:
        """Record that a SAVE is owed (or paid); the reason when the state dir refused."""
        path = self.save_owed_path(cluster)
        # this process remembers it too: a state dir that refuses the file loses no SAVE
        if owed:
            self._owed.add(cluster)
        else:
            self._owed.discard(cluster)
        try:
            if owed:
                self.ensure_dir()
                atomic_write(path, "SAVE MYSQL SERVERS TO DISK failed after a LOAD\n")
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            return f"{path} not written ({exc.strerror or exc}); retried next pass"
        return None

    # ------------------------------------------------------------ evictions made (Galera)

    def evicted_path(self, cluster: str) -> Path:
        return self._path(cluster, "evicted")

    def evicted(self, cluster: str) -> dict[str, str]:
        """The gcomm uuids this checker evicted, each with the node it was (HOST:PORT; "" when
        an older version wrote only the uuids). Unreadable: none."""
        try:
            data = json.loads(self.evicted_path(cluster).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if isinstance(data, list):
            return {str(u): "" for u in data}
        if isinstance(data, dict):
            return {str(u): str(node) for u, node in data.items()}
        return {}

    def record_evicted(self, cluster: str, uuids: Mapping[str, str]) -> str | None:
        """Keep the evicted uuids and their nodes (none: the file goes); the reason when the
        state dir refused."""
        path = self.evicted_path(cluster)
        try:
            if not uuids:
                path.unlink(missing_ok=True)
                return None
            if self.evicted(cluster) == dict(uuids):
                return None
            self.ensure_dir()
            atomic_write(path, json.dumps(dict(sorted(uuids.items()))))
        except OSError as exc:
            return f"{path} not written ({exc.strerror or exc})"
        return None

    def throttles_path(self, cluster: str) -> Path:
        return self._path(cluster, "evict-throttles")

    def eviction_throttles(
        self, cluster: str
    ) -> tuple[dict[NodeAddress, float], dict[NodeAddress, float]]:
        """When each node's eviction was last tried, and its withheld eviction last said
        (monotonic), as the last scheduler process left them: a new process asks a dead node's
        survivors again, or says a withheld eviction again, no sooner than a daemon would.
        From another boot, or unreadable: none."""
        try:
            data = json.loads(self.throttles_path(cluster).read_text(encoding="utf-8"))
            if not _same_clock(data.get("clock")):
                return {}, {}
            tried = {_node(n): float(at) for n, at in data["tried"].items()}
            withheld = {_node(n): float(at) for n, at in data["withheld"].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}, {}
        return tried, withheld

    def record_eviction_throttles(
        self,
        cluster: str,
        tried: Mapping[NodeAddress, float],
        withheld: Mapping[NodeAddress, float],
    ) -> str | None:
        """Keep the throttles for the next scheduler process (none: the file goes); the reason
        when the state dir refused."""
        path = self.throttles_path(cluster)
        payload = {
            "clock": _clock(),
            "tried": {str(n): at for n, at in sorted(tried.items())},
            "withheld": {str(n): at for n, at in sorted(withheld.items())},
        }
        try:
            if not tried and not withheld:
                path.unlink(missing_ok=True)
                return None
            self.ensure_dir()
            atomic_write(path, json.dumps(payload))
        except OSError as exc:
            return f"{path} not written ({exc.strerror or exc})"
        return None

    def latency_path(self, cluster: str) -> Path:
        return self._path(cluster, "latency")

    def causal_latency(self, cluster: str) -> tuple[tuple[float, ...], float | None]:
        """The cluster's last causal-read latencies (ms) and when they were last measured
        (monotonic; None from another boot). Unreadable or absent: none, never measured."""
        try:
            data = json.loads(self.latency_path(cluster).read_text(encoding="utf-8"))
            samples = tuple(float(ms) for ms in data["samples"])
            at = data.get("at") if _same_clock(data.get("clock")) else None
            return samples, float(at) if isinstance(at, (int, float)) else None
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return (), None

    def record_causal_latency(
        self, cluster: str, samples: Collection[float], at: float
    ) -> str | None:
        """Keep the latencies for the next process (a scheduler pass); the reason when the
        state dir refused."""
        path = self.latency_path(cluster)
        payload = {"clock": _clock(), "at": at, "samples": [round(ms, 3) for ms in samples]}
        try:
            self.ensure_dir()
            atomic_write(path, json.dumps(payload))
        except OSError as exc:
            return f"{path} not written ({exc.strerror or exc})"
        return None

    # ------------------------------------------------------------ a switchover's writer

    def writer_pin_path(self, cluster: str) -> Path:
        return self._path(cluster, "writer")

    def writer_pin(self, cluster: str) -> NodeAddress | None:
        """The writer a switchover chose, until released; None when none (or unreadable)."""
        try:
            return _node(self.writer_pin_path(cluster).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None

    def pin_writer(self, cluster: str, node: NodeAddress | None) -> None:
        path = self.writer_pin_path(cluster)
        if node is None:
            path.unlink(missing_ok=True)
            return
        self.ensure_dir()
        atomic_write(path, f"{node}\n")

    def file_path(self, cluster: str, suffix: str) -> Path:
        """`<checker>.<cluster>.<suffix>` in the state directory: a file of the cluster's that
        another module keeps (edges/hook_state.py)."""
        return self._path(cluster, suffix)

    # ------------------------------------------------------------ pause switch

    def paused(self, cluster: str) -> Path | None:
        """The pause file in force for this cluster, if any."""
        for path in (*self._pause_paths(None), self.pause_path(cluster)):
            if path.exists():
                return path
        return None

    def pause(self, cluster: str | None, reason: str) -> Path:
        self.ensure_dir()
        path = self.pause_path(cluster)
        atomic_write(path, reason + "\n")
        return path

    def resume(self, cluster: str | None) -> bool:
        removed = False
        for path in self._pause_paths(cluster):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed = True
        return removed


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@functools.cache
def _boot() -> str | None:
    """This boot's id: the monotonic clock's times mean something only within one boot."""
    try:
        return BOOT_ID.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def _clock() -> dict[str, object]:
    return {"kind": "monotonic", "boot": _boot()}


def _same_clock(written: object) -> bool:
    """The file's times count on this process's monotonic clock (same boot, known boot)."""
    return (
        isinstance(written, dict)
        and written.get("kind") == "monotonic"
        and _boot() is not None
        and written.get("boot") == _boot()
    )


def _node(text: str) -> NodeAddress:
    host, _, port = text.rpartition(":")
    return NodeAddress(host, int(port))


FileId = tuple[int, int, int]


def _file_id(path: Path) -> FileId:
    """Which version of a file this is: a rename gives a new inode, a rewrite a new mtime."""
    found = path.stat()
    return found.st_ino, found.st_mtime_ns, found.st_size


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
