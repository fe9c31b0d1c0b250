"""pytest fixtures of the Docker engine and the images the container tests build.

The engine is the one tests/setup.sh found or started; the images are built once per session
on the local base image (layers cached by the engine, so a second run rebuilds nothing that did
not change). No engine: a skip on a developer's machine, a failure in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.lab import require
from tests.lab.docker_engine import BASE_IMAGE, DockerEngine, build_image, engine_answers
from tests.lab.process import LabError

REPO = Path(__file__).resolve().parents[2]
CHECKER_IMAGE = "proxysql-checkers:test"
GALERA_IMAGE = "proxysql-checkers-galera:test"


@pytest.fixture(scope="session")
def docker_engine() -> str:
    """The base image's tag, on an engine that answers."""
    # testcontainers' reaper (Ryuk) is an image from a registry no lab machine reaches; every
    # container here is removed by its fixture instead
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    if not engine_answers():
        require.unavailable("no Docker engine answers (tests/setup.sh starts one)")
    try:
        DockerEngine().ensure_base()
    except LabError as exc:
        require.unavailable(f"the local base image {BASE_IMAGE} cannot be made: {exc}")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def checker_image(docker_engine: str) -> str:
    """The project's Dockerfile built on the local base, from this checkout."""
    build_image(REPO, CHECKER_IMAGE, {"BASE_IMAGE": docker_engine})
    return CHECKER_IMAGE


@pytest.fixture(scope="session")
def galera_image(docker_engine: str) -> str:
    """A MariaDB Galera node: Debian's mariadb-server and galera-4 on the local base."""
    build_image(
        REPO / "tests" / "containers" / "galera", GALERA_IMAGE, {"BASE_IMAGE": docker_engine}
    )
    return GALERA_IMAGE
