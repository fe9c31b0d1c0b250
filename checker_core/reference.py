"""The reference pages that must not drift from the code: every setting (from settings.keys)
and every metric (from metrics.METRICS). tests/unit/test_reference.py fails when a page in docs/
differs from what this module renders.

    python -m checker_core.reference docs/     # rewrite the pages
"""

from __future__ import annotations

import sys
from pathlib import Path

from checker_core.core.keys import ENV_PREFIX, KEYS, SECTIONS
from checker_core.core.schema import REQUIRED, Checker, Derived, Key

CONFIGURATION_PAGE = "configuration.md"
METRICS_PAGE = "metrics.md"
GENERATED = "Generated from {source} by `python -m checker_core.reference docs/`; do not edit."

_SECTION_TEXT = {
    "proxysql": "The ProxySQL admin interface the checker reads and writes.",
    "monitor": "The account the checker probes every node with (read-only statements).",
    "node_admin": "Optional: the account for actions on the nodes themselves (Galera eviction, "
    "a GR switchover). Only what enables those actions needs it.",
    "run": "How passes run: cadence, limits, state, logs, and the daemon's listener.",
    "cluster": "One `[[cluster]]` table per hostgroup set; a file may hold several.",
}


def _default(key: Key) -> str:
    if key.default is REQUIRED:
        return "required"
    if isinstance(key.default, Derived):
        return key.default.value
    if key.default is None:
        return "unset"
    if isinstance(key.default, bool):
        return "`true`" if key.default else "`false`"
    if isinstance(key.default, str):
        return f'`"{key.default}"`'
    return f"`{key.default}`"


def _allowed(key: Key) -> str:
    if key.choices:
        return ", ".join(f"`{c}`" for c in key.choices)
    if key.minimum is not None or key.maximum is not None:
        low = "" if key.minimum is None else f"{key.minimum}"
        high = "" if key.maximum is None else f"{key.maximum}"
        return f"{low} … {high}".strip()
    return ""


def _env(key: Key) -> str:
    if key.section == "cluster":
        return f"`{ENV_PREFIX}CLUSTER_<N>_{key.name.upper()}`"
    return f"`{ENV_PREFIX}{key.section.upper()}_{key.name.upper()}`"


def _checkers(key: Key) -> str:
    if set(key.checkers) == set(Checker):
        return "both"
    return ", ".join(c.command for c in key.checkers)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def configuration_page() -> str:
    lines = [
        "# Configuration reference",
        "",
        GENERATED.format(source="`checker_core/core/keys.py`"),
        "",
        "A TOML file (`--config FILE` or `$CHECKER_CONFIG`) holds the settings. An environment",
        "variable overrides the file, and `--set KEY=VALUE` (e.g. `--set run.log_level=debug`,",
        "`--set cluster[0].retry_down=2`) overrides both. Every problem is reported at once, each",
        "naming its key, with exit code 2. Secrets (`password`) are never printed; prefer",
        "`password_file` (first line of a file readable only by the checker's user).",
        "",
    ]
    for section in SECTIONS:
        keys = [k for k in KEYS if k.section == section]
        header = f"## `[[{section}]]`" if section == "cluster" else f"## `[{section}]`"
        lines += [header, "", _SECTION_TEXT[section], ""]
        lines += [
            "| key | default | allowed | checker | environment | meaning |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for key in keys:
            row = [
                f"`{key.name}`",
                _default(key),
                _allowed(key),
                _checkers(key),
                _env(key),
                _cell(key.doc + (" Secret: never logged." if key.secret else "")),
            ]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def metrics_page() -> str:
    from checker_core.service.metrics import METRICS, PREFIX

    lines = [
        "# Metrics reference",
        "",
        GENERATED.format(source="`checker_core/service/metrics.py`"),
        "",
        "Served by the daemon on `/metrics` when `run.metrics_listen` is set (Prometheus text",
        f"format). Every name starts with `{PREFIX}`; the `process_*` metrics of the Python",
        "client (resident memory, CPU seconds, open file descriptors) are served too.",
        "",
        "| metric | type | labels | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for spec in METRICS:
        labels = ", ".join(f"`{label}`" for label in spec.labels)
        kind = spec.kind.__name__.lower()
        lines.append(f"| `{spec.exposed}` | {kind} | {labels} | {_cell(spec.doc)} |")
    lines.append("")
    return "\n".join(lines)


PAGES = {CONFIGURATION_PAGE: configuration_page, METRICS_PAGE: metrics_page}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m checker_core.reference DOCS_DIR", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    for name, render in PAGES.items():
        (folder / name).write_text(render())
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
