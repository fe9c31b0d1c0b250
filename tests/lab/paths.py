"""Where the lab keeps its data (per run) and its cache (between runs)."""

from __future__ import annotations

import os
from pathlib import Path

LOOPBACK = "127.0.0.1"


def lab_dir() -> Path:
    """Data, sockets, logs and pid files of every lab server (LAB_DIR overrides)."""
    path = Path(os.environ.get("LAB_DIR", "/tmp/proxysql-checkers-lab"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    """Downloaded and unpacked binaries, kept between runs (LAB_CACHE overrides)."""
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    default = cache_home / "proxysql-checkers-lab"
    path = Path(os.environ.get("LAB_CACHE", str(default)))
    path.mkdir(parents=True, exist_ok=True)
    return path
