"""The daemon's status page (`/` of its listener) in a real headless Chromium (Debian's): on the
lab's Galera cluster behind ProxySQL it shows the writer, each node's verdict and who writes
next; after the writer is killed it shows the new writer and the move in its timeline. A
screenshot of the page after the failover is kept in test-artifacts/ of the checkout (or
$TEST_ARTIFACTS)."""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.model import NodeAddress
from tests.integration.rig import Daemon, Rig
from tests.lab.process import free_port, wait_until
from tests.lab.require import unavailable

pytestmark = [pytest.mark.galera, pytest.mark.proxysql]

ROOT = Path(__file__).resolve().parents[2]


def artifacts() -> Path:
    where = Path(os.environ.get("TEST_ARTIFACTS") or ROOT / "test-artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    unavailable("chromium (Debian's chromium package) is not installed")


def browse(url: str, profile: Path, *extra: str) -> str:
    """The page as Chromium has it once loaded (its DOM), headless, no network but 127.0.0.1."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace to sandbox in
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--window-size=1280,1600",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Page(html.parser.HTMLParser):
    """What the test reads of the page: the writer, each node's verdict, the events, the
    refresh, and whether anything would be fetched from elsewhere."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.writers = ""
        self.next = ""  # who writes next, as failover readiness says
        self.verdicts: dict[str, str] = {}
        self.events: list[str] = []
        self.refresh: str | None = None
        self.outside: list[str] = []
        self._node: str | None = None
        self._cells: list[str] = []
        self._in: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "meta" and found.get("http-equiv") == "refresh":
            self.refresh = found.get("content")
        if tag in ("script", "link", "img", "iframe") or found.get("src"):
            self.outside.append(tag)
        if "data-writers" in found:
            self.writers = found["data-writers"] or ""
        if "data-next" in found:
            self.next = found["data-next"] or ""
        if tag == "tr" and "data-node" in found:
            self._node, self._cells = found["data-node"], []
        if tag == "td" and self._node:
            self._in = "td"
            self._cells.append("")
        if tag == "li":
            self._in = "li"
            self.events.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._node:
            self.verdicts[self._node] = self._cells[2].strip()
            self._node = None
        if tag in ("td", "li"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "td" and self._cells:
            self._cells[-1] += data
        elif self._in == "li":
            self.events[-1] += data


def ready(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10) as answer:
        document = json.load(answer)
    return all(c["failover_ready"] is not None for c in document["clusters"])


def test_the_page_shows_the_writer_move_after_a_kill(
    rig: Rig, galera: Any, nodes: list[NodeAddress], tmp_path: Path
) -> None:
    n1, n2, n3 = (str(n) for n in nodes)
    port = free_port()
    rig.run_settings.update(
        interval_ms=1000, max_runtime_ms=900, metrics_listen=f"127.0.0.1:{port}"
    )
    rig.write_config()
    daemon = Daemon(rig)
    url = f"http://127.0.0.1:{port}/"
    try:
        daemon.next_pass()
        # readiness is worked out off the pass's loop: the page has it once /status has
        wait_until(lambda: ready(port), 30, "failover readiness worked out")
        before = Page(browse(url, tmp_path / "profile", "--dump-dom"))
        assert before.writers == n1
        assert before.next == n2
        assert before.verdicts == {n1: "healthy", n2: "healthy", n3: "healthy"}
        assert before.refresh is not None and int(before.refresh) >= 2
        assert before.outside == [], "the page fetches nothing from anywhere"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
            assert b"failover: " in answer.read()

        galera.kill(1)
        wait_until(lambda: rig.writers == {nodes[1]}, 30, "the failover")
        daemon.next_pass()  # the board has the pass that moved it (and one more)
        after = Page(browse(url, tmp_path / "profile", "--dump-dom"))
        assert after.writers == n2
        assert after.verdicts[n1] == "down"
        moved = [e for e in after.events if "writer_changed" in e]
        assert moved and f"writer {n1} -> {n2}" in moved[0], after.events
        assert any("node_out" in e and n1 in e for e in after.events), after.events

        shot = artifacts() / "status-page-after-failover.png"
        shot.unlink(missing_ok=True)
        browse(url, tmp_path / "profile", f"--screenshot={shot}")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    finally:
        assert daemon.stop() == 0
