"""The lab's Docker engine helper: where the base image comes from, and whose dockerd it stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab.apt_sources import apt_mirror
from tests.lab.docker_engine import DockerEngine, engine_answers
from tests.lab.process import LabError


def test_apt_mirror_is_the_one_apt_uses_for_the_release_itself(tmp_path: Path) -> None:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    with pytest.raises(LabError, match="no Debian mirror"):
        apt_mirror(etc)  # nothing configured: no host of our own to fall back on
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n"
        "URIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\n"
        "Components: main\n"
        "\n"
        "Types: deb\n"
        "# a comment: with a colon\n"
        "URIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
    )
    assert apt_mirror(etc) == "http://mirror.example/debian"
    # the one-line format, read first
    (etc / "sources.list").write_text(
        "deb http://other.example/debian bookworm-updates main\n"
        "deb [signed-by=/usr/share/keyrings/k.gpg] http://other.example/debian bookworm main\n"
    )
    assert apt_mirror(etc) == "http://other.example/debian"


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
def test_down_stops_only_a_dockerd_the_lab_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no pid file of its own (another lab directory), `down` leaves the running engine
    alone, even though a dockerd runs."""
    monkeypatch.setenv("LAB_DIR", str(tmp_path))
    engine = DockerEngine()
    assert engine.pid() is None
    assert engine.down() is False
    assert engine_answers()
    assert engine.up() is False, "an engine answers: nothing to start"
    assert not (tmp_path / "docker" / "dockerd.pid").exists()
