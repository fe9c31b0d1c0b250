"""The Debian mirror this machine's apt already uses: the only archive host the lab may reach,
read from the apt sources (one-line and deb822 files), never written into the project."""

from __future__ import annotations

import re
from pathlib import Path

from tests.lab.process import LabError

SUITE = "bookworm"

_ONE_LINE = re.compile(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", re.M)


def apt_mirror(etc_apt: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt already uses for bookworm itself (not -updates, not -security),
    from sources.list and sources.list.d (one-line and deb822 files)."""
    files = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {
                    k.strip().lower(): v.strip()
                    for k, sep, v in (line.partition(":") for line in stanza.splitlines())
                    if sep and not k.startswith("#")
                }
                if SUITE in fields.get("suites", "").split():
                    uris = fields.get("uris", "").split()
                    if uris:
                        return uris[0]
        else:
            for match in _ONE_LINE.finditer(text):
                if match.group(2) == SUITE:
                    return match.group(1)
    raise LabError(
        f"no Debian mirror for {SUITE} in {etc_apt}/sources.list or {etc_apt}/sources.list.d; "
        "the lab fetches packages only from the mirror apt is configured with"
    )
