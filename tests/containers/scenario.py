"""What every container scenario uses: a sampler of the writer hostgroup through a fault, and
readers of a pass's lines and of the live rows."""

from __future__ import annotations

import threading
import time
from typing import Any

from checker_core.core.model import NodeAddress, ServerStatus
from tests.integration.rig import HG, PassRun, Rig, admin_for, as_configured

SAMPLE_EVERY = 0.1  # s
TRAFFIC = {HG.writer, HG.reader, HG.backup_writer}


class WriterSampler:
    """Reads the writer hostgroup's live rows every SAMPLE_EVERY seconds on a connection of its
    own, from `with` to the end of the block."""

    def __init__(self, lab: Any) -> None:
        self.lab = lab
        self.samples: list[frozenset[NodeAddress]] = []
        self.taken: list[float] = []  # when each sample's read began (monotonic)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._last_mark: float | None = None

    def __enter__(self) -> WriterSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # The block may end within one sampling period of its last mark: keep sampling until a
        # read begun after the mark has landed, so the "since" check always has evidence.
        deadline = time.monotonic() + 10
        while (
            self._last_mark is not None
            and not self._sampled_since(self._last_mark)
            and self._thread.is_alive()
            and time.monotonic() < deadline
        ):
            time.sleep(SAMPLE_EVERY / 4)
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        admin = admin_for(self.lab)
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                try:
                    rows = as_configured(admin.read_rows(HG.managed).runtime)
                except Exception as exc:  # a sample lost is reported, never a crash
                    self.errors.append(str(exc))
                else:
                    self.taken.append(began)
                    self.samples.append(
                        frozenset(
                            r.node
                            for r in rows
                            if r.hostgroup_id == HG.writer and r.status is ServerStatus.ONLINE
                        )
                    )
                self._stop.wait(SAMPLE_EVERY)
        finally:
            admin.close()

    def mark(self) -> float:
        """Now, for assert_not_writer_since: call it when the pass that had to act has ended."""
        self._last_mark = time.monotonic()
        return self._last_mark

    def _sampled_since(self, mark: float) -> bool:
        return any(t > mark for t in list(self.taken))

    def assert_not_writer_since(self, mark: float, node: NodeAddress) -> None:
        """node was in no sample read after `mark`: a writer not a moment beyond the passes the
        rules allow."""
        later = [s for t, s in zip(self.taken, self.samples, strict=True) if t > mark]
        assert later, "no sample after the pass"
        assert not [s for s in later if node in s], f"{node} still a writer after its pass"

    def assert_never_two_writers(self) -> None:
        assert len(self.samples) >= 10, f"too few samples ({self.samples}; {self.errors})"
        doubled = [s for s in self.samples if len(s) > 1]
        assert not doubled, f"two ONLINE writers at once: {doubled[0]}"


def node_lines(result: PassRun, node: NodeAddress) -> list[dict[str, Any]]:
    return [e for e in result.logs if e.get("event") == "node" and e.get("node") == str(node)]


def verdict_of(result: PassRun, node: NodeAddress) -> tuple[str, str]:
    (line,) = node_lines(result, node)
    return str(line["verdict"]), str(line["reason"])


def one_pass(rig: Rig) -> PassRun:
    result = rig.run()
    assert result.code == 0, result.stderr
    return result


def routed(rig: Rig, node: NodeAddress) -> set[int]:
    """The hostgroups that carry traffic where node is ONLINE (not the offline one)."""
    return {
        r.hostgroup_id
        for r in rig.live()
        if r.node == node and r.status is ServerStatus.ONLINE and r.hostgroup_id in TRAFFIC
    }
