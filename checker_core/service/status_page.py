"""The daemon's status page (`/` of its listener): every cluster's nodes with where ProxySQL
routes them, their verdict and why, who writes next, and the recent events, as one HTML page
that reloads itself. No script, no asset from anywhere: it works offline. Pure: records in,
bytes out."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any, Protocol

# outcomes whose plan is what ProxySQL routes after the pass (else the rows it read)
LIVE = ("changed", "unchanged", "blind")
GOOD = ("healthy",)
HELD = ("suspect", "unseen", "recovering", "lagging", "last_resort", "brownout")

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#1d2430;background:#f6f7f9}
h1{font-size:1.3em;margin:0 0 .2em}
.meta{color:#5b6472;font-size:.9em;margin-bottom:1em}
section{background:#fff;border:1px solid #d9dde3;border-radius:6px;padding:.8em 1em;margin:0 0 1em}
h2{font-size:1.1em;margin:0 0 .4em}
table{border-collapse:collapse;width:100%;font-size:.9em;margin:.4em 0}
th,td{text-align:left;padding:.25em .5em;border-bottom:1px solid #eceef1;vertical-align:top}
th{color:#5b6472;font-weight:600}
.v{font-weight:600;border-radius:3px;padding:0 .35em}
.healthy{background:#dff3e4;color:#1b6b34}
.held{background:#fff2d6;color:#8a5a00}
.bad{background:#fbe0e0;color:#9d1c1c}
.writer{font-weight:700}
.ok{color:#1b6b34}.warn{color:#9d1c1c}
ol{margin:.3em 0;padding-left:1.2em;font-size:.9em}
li{margin:.1em 0}
.t{color:#5b6472;font-variant-numeric:tabular-nums}
"""


class Entry(Protocol):
    """A line of a cluster's timeline (board.TimelineEntry)."""

    @property
    def at(self) -> float: ...  # wall clock

    @property
    def kind(self) -> str: ...

    @property
    def summary(self) -> str: ...


def render(
    document: Mapping[str, Any],
    timelines: Mapping[str, Sequence[Entry]],
    health: Mapping[str, Any],
    refresh_s: int,
    now: float,
) -> bytes:
    """The page: `document` is /status's, `timelines` each cluster's recent events (oldest
    first), `health` /health's."""
    checker = escape(str(document.get("checker", "")))
    healthy = health.get("status") == "ok"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="refresh" content="{int(refresh_s)}">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{checker}-checker status</title><style>{STYLE}</style></head><body>",
        f"<h1>{checker}-checker</h1>",
        f'<div class="meta">{_stamp(now)} UTC · '
        f'<span class="{"ok" if healthy else "warn"}">'
        f"{escape(str(health.get('status', '')))}</span>: "
        f"{escape(str(health.get('reason', '')))} · reloads every {int(refresh_s)} s</div>",
    ]
    clusters = list(document.get("clusters", ()))
    if not clusters:
        parts.append("<section>No pass has ended yet.</section>")
    for cluster in clusters:
        name = str(cluster.get("cluster", ""))
        parts.append(_cluster(cluster, timelines.get(name, ())))
    parts.append("</body></html>")
    return ("\n".join(parts) + "\n").encode()


def _cluster(cluster: Mapping[str, Any], timeline: Sequence[Entry]) -> str:
    name = escape(str(cluster.get("cluster", "")))
    writers = cluster.get("writers")
    shown = "unknown" if writers is None else ", ".join(map(str, writers)) or "none"
    live = cluster.get("outcome") in LIVE
    lines = [
        f'<section id="cluster-{name}"><h2>cluster {name}</h2>',
        f'<div>writer: <span class="writer" data-writers="{escape(shown)}">{escape(shown)}'
        "</span></div>",
        f"<div>{_readiness(cluster)}</div>",
        f'<div class="meta">last pass: {escape(str(cluster.get("summary", "")))}</div>',
        "<table><tr><th>node</th><th>routed in</th><th>verdict</th><th>member role</th>"
        "<th>why</th></tr>",
    ]
    for node in cluster.get("nodes", ()):
        routed = node.get("next") if live else node.get("now")
        verdict = str(node.get("verdict", ""))
        lines.append(
            f'<tr data-node="{escape(str(node.get("node")))}">'
            f"<td>{escape(str(node.get('node')))}</td>"
            f"<td>{escape(str(routed))}</td>"
            f'<td><span class="v {_tone(verdict)}">{escape(verdict)}</span></td>'
            f"<td>{escape(str(node.get('member_role') or '-'))}</td>"
            f"<td>{escape(str(node.get('reason', '')))}</td></tr>"
        )
    lines.append("</table>")
    for warning in cluster.get("warnings", ()):
        lines.append(f'<div class="warn">warning: {escape(str(warning))}</div>')
    lines.append("<div><b>recent events</b></div>")
    if timeline:
        lines.append("<ol>")
        for entry in reversed(timeline):
            lines.append(
                f'<li><span class="t">{_stamp(entry.at)}</span> '
                f"<b>{escape(entry.kind)}</b> {escape(entry.summary)}</li>"
            )
        lines.append("</ol>")
    else:
        lines.append('<div class="meta">none since the daemon started</div>')
    lines.append("</section>")
    return "\n".join(lines)


def _readiness(cluster: Mapping[str, Any]) -> str:
    """Who writes next: the readiness the daemon worked out, in its own words (they name the
    next writer)."""
    ready = cluster.get("failover_ready")
    reason = escape(str(cluster.get("readiness") or "not worked out yet"))
    if ready is None:
        return f"failover: {reason}"
    tone = "ok" if ready else "warn"
    following = ", ".join(str(n) for n in cluster.get("next_writers", ())) or "none"
    return f'failover: <span class="{tone}" data-next="{escape(following)}">{reason}</span>'


def _tone(verdict: str) -> str:
    if verdict in GOOD:
        return "healthy"
    return "held" if verdict in HELD else "bad"


def _stamp(wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wall))
