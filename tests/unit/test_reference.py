"""docs/configuration.md and docs/metrics.md are what the code declares: adding a setting or a
metric without regenerating them (python -m checker_core.reference docs/) fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from checker_core.core.keys import KEYS
from checker_core.reference import PAGES
from checker_core.service.metrics import METRICS

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_in_docs_is_the_generated_one(page: str) -> None:
    assert (DOCS / page).read_text() == PAGES[page](), (
        f"docs/{page} is out of date: run python -m checker_core.reference docs/"
    )


def test_every_setting_and_metric_has_a_row_in_docs() -> None:
    configuration = (DOCS / "configuration.md").read_text()
    for key in KEYS:
        assert f"| `{key.name}` |" in configuration, key
    metrics = (DOCS / "metrics.md").read_text()
    for spec in METRICS:
        assert f"| `{spec.exposed}` |" in metrics, spec.name
