"""Missing lab prerequisites: a skip on a developer's machine, a failure in CI.

CI must show the integration tests running on the real clusters, so there a missing server is an
error, never a silent skip.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"lab prerequisite missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)
