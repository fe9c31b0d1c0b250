"""`healthcheck`: the daemon's /health asked, for a container's HEALTHCHECK."""

from __future__ import annotations

import click

from checker_core.cli.common import Invocation, fail, load_settings
from checker_core.exitcodes import Exit

DEFAULT_LISTEN = "127.0.0.1:9140"


MAX_HEALTH_TIMEOUT_S = 3600.0


@click.command("healthcheck")
@click.option(
    "--listen",
    envvar="CHECKER_RUN_METRICS_LISTEN",
    metavar="HOST:PORT",
    help="The daemon's listener (default: $CHECKER_RUN_METRICS_LISTEN, else run.metrics_listen "
    "of the configuration file, else 127.0.0.1:9140).",
)
@click.option("--timeout", "timeout_s", default=3.0, show_default=True, help="Seconds to wait.")
@click.pass_obj
def healthcheck_command(inv: Invocation, listen: str | None, timeout_s: float) -> None:
    """Ask a running daemon's /health: exit 0 when healthy, 1 otherwise (for HEALTHCHECK)."""
    import http.client
    import math
    import urllib.error
    import urllib.request

    from checker_core.core.settings import ListenAddress

    if not math.isfinite(timeout_s) or timeout_s <= 0 or timeout_s > MAX_HEALTH_TIMEOUT_S:
        fail(
            f"--timeout: {timeout_s} is not a number of seconds between 0 and "
            f"{MAX_HEALTH_TIMEOUT_S:g} (e.g. --timeout 3)",
            Exit.BAD_INPUT,
        )
    if listen is not None and any(c.isspace() for c in listen):
        fail(f"--listen: {listen!r} holds a space: expected HOST:PORT", Exit.BAD_INPUT)

    if listen is None and inv.config is not None:
        configured = load_settings(inv).run.metrics_listen
        listen = None if configured is None else str(configured)
    try:
        address = ListenAddress.parse(listen or DEFAULT_LISTEN)
    except ValueError as exc:
        fail(f"--listen: {exc}", Exit.BAD_INPUT)
    url = address.url("/health")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 (http only)
            click.echo(answer.read().decode(errors="replace").strip())
    except urllib.error.HTTPError as exc:
        fail(exc.read().decode(errors="replace").strip() or f"{url}: {exc}", Exit.FAILED)
    except (http.client.HTTPException, UnicodeError) as exc:
        # something answers there, but not the daemon's HTTP listener
        fail(
            f"{url}: the service there does not answer HTTP ({type(exc).__name__}); "
            "is --listen (run.metrics_listen) the daemon's listener?",
            Exit.FAILED,
        )
    except OSError as exc:
        fail(f"{url}: no answer ({exc})", Exit.FAILED)
