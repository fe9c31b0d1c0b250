"""Configuration: TOML file < environment (CHECKER_*) < command line (--set), validated at once.

Every problem is reported together, each naming its key (`cluster[0].reader_hostgroup: ...`),
so an operator fixes a file in one round instead of one error per run. Where each value comes
from is sources.py's, how a value is checked against its key values.py's, the accounts
accounts.py's; this module makes the settings records and checks what spans keys.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from checker_core.core.hostname import host_problem
from checker_core.core.keys import SECTIONS
from checker_core.core.leadership import ProxyAddress
from checker_core.core.model import Hostgroups
from checker_core.core.schema import INT_MAX, Checker, Derived
from checker_core.core.settings import (
    ClusterSettings,
    Endpoint,
    ListenAddress,
    ProxySQLSettings,
    RunSettings,
    Settings,
)
from checker_core.settings.accounts import endpoint, node_admin
from checker_core.settings.hooks import OPTIONAL_HOOK_KEYS, hook_settings
from checker_core.settings.problems import ConfigError, Problem
from checker_core.settings.sources import (
    CONFIG_ENV,
    apply_overrides,
    cli_overrides,
    env_overrides,
    named_after_origin,
    read_file,
    suggest,
)
from checker_core.settings.values import Values, section_values

# what the rest of the program takes from here
__all__ = ["CLUSTER_NAME", "CONFIG_ENV", "ConfigError", "Problem", "load"]

CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

_HOSTGROUP_KEYS = (
    "writer_hostgroup",
    "reader_hostgroup",
    "backup_writer_hostgroup",
    "offline_hostgroup",
    "config_writer_hostgroup",
    "config_reader_hostgroup",
)


def _cluster(
    index: int,
    table: object,
    *,
    checker: Checker,
    used: dict[int, str],
    names: dict[str, str],
    problems: list[Problem],
) -> ClusterSettings | None:
    where = f"cluster[{index}]"
    values = section_values("cluster", table, where, checker, problems)
    named = _name_ok(values, where, names, problems)
    derived_from = _derive_templates(values, where, problems)
    placed = _hostgroups_ok(values, where, derived_from, used, problems)
    hooks = hook_settings(values, where, problems)
    if not (named and placed) or not values.complete("main_segment", *OPTIONAL_HOOK_KEYS):
        return None
    return ClusterSettings(
        name=values.text("name"),
        hostgroups=Hostgroups(*(values.number(k) for k in _HOSTGROUP_KEYS)),
        max_writers=values.number("max_writers"),
        writer_is_also_reader=values.number("writer_is_also_reader"),
        max_transactions_behind=values.number("max_transactions_behind"),
        retry_up=values.number("retry_up"),
        retry_down=values.number("retry_down"),
        fail_back=values.flag("fail_back"),
        kill_demoted_writer_connections=values.flag("kill_demoted_writer_connections"),
        drain_timeout_ms=values.number("drain_timeout_ms"),
        main_segment=values.optional_number("main_segment"),
        brownout=values.text("brownout"),
        evict_dead_nodes=values.flag("evict_dead_nodes"),
        unresponsive_after_ms=values.number("unresponsive_after_ms")
        if values.flag("evict_unresponsive_nodes")
        else 0,
        hooks=hooks,
    )


def _name_ok(values: Values, where: str, names: dict[str, str], problems: list[Problem]) -> bool:
    """The cluster's name is well-formed and no other cluster's (a bad value is said already)."""
    name = values["name"]
    if not isinstance(name, str):
        return True
    if not CLUSTER_NAME.fullmatch(name):
        problems.append(Problem(f"{where}.name", f"{name!r}: use 1-64 of A-Z a-z 0-9 _ . -"))
        return False
    if name in names:
        problems.append(Problem(f"{where}.name", f"{name!r} is already {names[name]}.name"))
        return False
    names[name] = where
    return True


def _derive_templates(values: Values, where: str, problems: list[Problem]) -> dict[str, str]:
    """The template hostgroups not set: 8000 + their base's; returns {key: its base key}."""
    derived_from: dict[str, str] = {}
    for key, base, marker in (
        ("config_writer_hostgroup", "writer_hostgroup", Derived.CONFIG_WRITER),
        ("config_reader_hostgroup", "reader_hostgroup", Derived.CONFIG_READER),
    ):
        if values[key] is not marker:
            continue
        base_value = values[base]
        values[key] = 8000 + base_value if isinstance(base_value, int) else None
        derived_from[key] = base
        if isinstance(base_value, int) and 8000 + base_value > INT_MAX:
            problems.append(
                Problem(
                    f"{where}.{key}",
                    f"its default 8000 + {base} ({8000 + base_value}) is above ProxySQL's "
                    f"largest hostgroup id {INT_MAX}; set {key} yourself",
                )
            )
            values[key] = None
    return derived_from


def _hostgroups_ok(
    values: Values,
    where: str,
    derived_from: Mapping[str, str],
    used: dict[int, str],
    problems: list[Problem],
) -> bool:
    """Every hostgroup of the cluster is its own: neither twice in it nor another cluster's."""
    ok = True
    mine: dict[int, str] = {}
    clashed: set[str] = set()
    for key in _HOSTGROUP_KEYS:
        hostgroup = values[key]
        if not isinstance(hostgroup, int):
            ok = False
            continue
        clash = mine.get(hostgroup) or used.get(hostgroup)
        if clash is None:
            mine[hostgroup] = key
            continue
        ok = False
        clashed.add(key)
        if derived_from.get(key) in clashed:
            continue  # the clash follows from its base key's, already reported
        shown = (
            f"{hostgroup} (8000 + {derived_from[key]})" if key in derived_from else str(hostgroup)
        )
        relation = "the same as" if hostgroup in mine else "already"
        problems.append(Problem(f"{where}.{key}", f"{shown} is {relation} {clash}"))
    for hostgroup, key in mine.items():
        used.setdefault(hostgroup, f"{where}.{key}")
    return ok


def _run(values: Values, problems: list[Problem]) -> RunSettings | None:
    interval, runtime = values["interval_ms"], values["max_runtime_ms"]
    if isinstance(interval, int) and isinstance(runtime, int) and runtime >= interval:
        problems.append(
            Problem(
                "run.max_runtime_ms",
                f"{runtime} must be below run.interval_ms ({interval}) so passes never overlap",
            )
        )
        return None
    state_dir = values["state_dir"]
    if isinstance(state_dir, str) and not _state_dir_ok(Path(state_dir), problems):
        return None
    listen: ListenAddress | None = None
    text = values["metrics_listen"]
    if isinstance(text, str):
        listen = _listen_address(text, problems)
        if listen is None:
            return None
    if not values.complete("metrics_listen"):
        return None
    return RunSettings(
        interval_ms=values.number("interval_ms"),
        max_runtime_ms=values.number("max_runtime_ms"),
        state_dir=Path(values.text("state_dir")),
        persist=values.flag("persist"),
        log_format=values.text("log_format"),
        log_level=values.text("log_level"),
        log_stream=values.text("log_stream"),
        metrics_listen=listen,
        watch_interval_ms=values.number("watch_interval_ms"),
    )


def _state_dir_ok(path: Path, problems: list[Problem]) -> bool:
    if not path.is_absolute():
        problems.append(
            Problem(
                "run.state_dir",
                f"{str(path)!r} must be an absolute path "
                "(the scheduler runs with no working directory of ours)",
            )
        )
        return False
    if path.exists() and not path.is_dir():
        problems.append(Problem("run.state_dir", f"{path} exists and is not a directory"))
        return False
    blocker = _state_dir_blocker(path)
    if blocker is not None:
        problems.append(Problem("run.state_dir", blocker))
        return False
    return True


def _listen_address(text: str, problems: list[Problem]) -> ListenAddress | None:
    if any(c.isspace() for c in text):
        problems.append(
            Problem("run.metrics_listen", f"{text!r} holds a space: expected HOST:PORT")
        )
        return None
    try:
        return ListenAddress.parse(text)
    except ValueError as exc:
        problems.append(Problem("run.metrics_listen", str(exc)))
        return None


def _state_dir_blocker(path: Path) -> str | None:
    """Why the state directory can never be created, if it cannot: a regular file where one of
    its parents should be (known now, not at the first pass that writes a counter)."""
    for parent in path.parents:
        try:
            if parent.is_dir():
                return None
            if parent.exists():
                return f"{path} cannot be created: {parent} is a file, not a directory"
        except OSError as exc:
            return f"{path} cannot be created: {parent}: {exc.strerror or exc}"
    return None


def _timing_warnings(monitor: Endpoint, proxysql: Endpoint, run: RunSettings) -> list[str]:
    """Timeouts that cannot play out inside a pass: the pass is cut short first, and the
    operator reads "pass cut short" instead of the timeout they set."""
    found = []
    probe_budget = run.probe_budget_ms
    for key, timeout, what in (
        ("connect_timeout_ms", monitor.connect_timeout_ms, "a connect"),
        ("read_timeout_ms", monitor.read_timeout_ms, "a question"),
    ):
        if timeout >= probe_budget:
            # a node's silence counts only after its whole timeout (core.probes.whole_timeout)
            found.append(
                f"monitor.{key} ({timeout}) is not below the probes' share of "
                f"run.max_runtime_ms ({probe_budget:.0f} of {run.max_runtime_ms}): a node that "
                f"does not answer {what} is cut off by the pass's deadline before this timeout, "
                "so one pass never judges it silent, only unheard (it keeps its place): a dead or "
                "frozen node is taken out only once its unheard probes in a row add up to its "
                "whole timeout, some passes later"
            )
    probe = monitor.connect_timeout_ms + monitor.read_timeout_ms
    if probe > run.max_runtime_ms:
        found.append(
            f"monitor.connect_timeout_ms + monitor.read_timeout_ms ({probe}) is above "
            f"run.max_runtime_ms ({run.max_runtime_ms}): a slow node is cut off by the pass's "
            "deadline, not by its timeouts"
        )
    if proxysql.connect_timeout_ms >= run.max_runtime_ms:
        found.append(
            f"proxysql.connect_timeout_ms ({proxysql.connect_timeout_ms}) is not below "
            f"run.max_runtime_ms ({run.max_runtime_ms}): an admin that does not answer is "
            "reported as a pass cut short"
        )
    if proxysql.read_timeout_ms > run.max_runtime_ms:
        found.append(
            f"proxysql.read_timeout_ms ({proxysql.read_timeout_ms}) is above "
            f"run.max_runtime_ms ({run.max_runtime_ms}): an admin statement that hangs is "
            "cut off by the pass's deadline, not by this timeout"
        )
    if run.max_runtime_ms > run.interval_ms * 0.9:
        found.append(
            f"run.max_runtime_ms ({run.max_runtime_ms}) leaves less than a tenth of "
            f"run.interval_ms ({run.interval_ms}) between passes"
        )
    return found


def _silence_warnings(monitor: Endpoint, clusters: Sequence[ClusterSettings]) -> list[str]:
    """A member is silent only once it has left a question unanswered for the monitor's read
    timeout (an answer within it is never silence): a shorter unresponsive_after_ms cannot act
    sooner than that, and the operator should read so before the day it matters."""
    return [
        f"cluster {c.name}: unresponsive_after_ms ({c.unresponsive_after_ms}) is below "
        f"monitor.read_timeout_ms ({monitor.read_timeout_ms}): a member is silent only after it "
        "leaves a question unanswered for the read timeout, so it is taken out no sooner"
        for c in clusters
        if 0 < c.unresponsive_after_ms < monitor.read_timeout_ms
    ]


def _file_warnings(path: Path, raw: dict[str, Any]) -> tuple[str, ...]:
    inline = any(
        isinstance(raw.get(s), dict) and "password" in raw[s]
        for s in ("proxysql", "monitor", "node_admin")
    )
    try:
        mode = path.stat().st_mode
    except OSError:
        return ()
    if inline and mode & (stat.S_IRGRP | stat.S_IROTH | stat.S_IWOTH):
        return (f"{path} holds a password and is readable by others: chmod 600 {path}",)
    return ()


def _proxy_address(value: object, problems: list[Problem]) -> ProxyAddress | None:
    if value is None:
        return None
    text = str(value)
    host, sep, port = text.rpartition(":")
    problem = None
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        problem = f"{text!r}: expected host:port, as proxysql_servers names this proxy"
    else:
        problem = host_problem(host)
    if problem is not None:
        problems.append(Problem("proxysql.cluster_address", problem))
        return None
    return ProxyAddress(host, int(port))


def load(
    path: str | Path,
    checker: Checker,
    env: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
) -> Settings:
    """Read, merge and validate; raise ConfigError listing every problem."""
    source = Path(path)
    raw = read_file(source)
    problems: list[Problem] = []
    if isinstance(raw.get("cluster"), dict):  # a single [cluster] table reads as one cluster
        raw["cluster"] = [raw["cluster"]]
    env_pairs = env_overrides(os.environ if env is None else env, problems)
    origins = apply_overrides(raw, env_pairs + cli_overrides(overrides, problems), problems)
    for section in raw:
        if section not in SECTIONS:
            problems.append(Problem(section, f"unknown section{suggest(section, SECTIONS)}"))
    warnings: list[str] = []
    proxysql_values = section_values(
        "proxysql", raw.get("proxysql", {}), "proxysql", checker, problems
    )
    proxysql_endpoint = endpoint(proxysql_values, "proxysql", problems, warnings)
    monitor = endpoint(
        section_values("monitor", raw.get("monitor", {}), "monitor", checker, problems),
        "monitor",
        problems,
        warnings,
    )
    admin = node_admin(raw.get("node_admin"), checker, problems, warnings)
    run = _run(section_values("run", raw.get("run", {}), "run", checker, problems), problems)
    if monitor is not None and run is not None and monitor.connect_timeout_ms >= run.max_runtime_ms:
        problems.append(
            Problem(
                "monitor.connect_timeout_ms",
                f"{monitor.connect_timeout_ms} must be below "
                f"run.max_runtime_ms ({run.max_runtime_ms})",
            )
        )
    clusters = _clusters(raw, checker, problems)
    proxysql = _proxysql(proxysql_values, proxysql_endpoint, problems)
    if problems:
        raise ConfigError(named_after_origin(problems, origins))
    assert proxysql is not None and monitor is not None and run is not None
    return Settings(
        checker=checker,
        source=source.resolve(),
        proxysql=proxysql,
        monitor=monitor,
        run=run,
        clusters=tuple(clusters),
        node_admin=admin,
        warnings=_file_warnings(source, raw)
        + tuple(warnings)
        + tuple(_timing_warnings(monitor, proxysql.endpoint, run))
        + tuple(_silence_warnings(monitor, clusters)),
    )


def _clusters(
    raw: dict[str, Any], checker: Checker, problems: list[Problem]
) -> list[ClusterSettings]:
    """Every [[cluster]] table's settings; an evicting one needs [node_admin]."""
    tables = raw.get("cluster")
    if tables is None:
        problems.append(
            Problem("cluster", "no [[cluster]] table: at least one cluster is required")
        )
        return []
    if not isinstance(tables, list):
        problems.append(Problem("cluster", "expected [[cluster]] tables"))
        return []
    if not tables:
        problems.append(
            Problem("cluster", "an empty list: at least one [[cluster]] table is required")
        )
        return []
    clusters: list[ClusterSettings] = []
    used: dict[int, str] = {}
    names: dict[str, str] = {}
    for index, table in enumerate(tables):
        cluster = _cluster(index, table, checker=checker, used=used, names=names, problems=problems)
        if cluster is None:
            continue
        clusters.append(cluster)
        for key, on in (
            ("evict_dead_nodes", cluster.evict_dead_nodes),
            ("evict_unresponsive_nodes", cluster.unresponsive_after_ms > 0),
        ):
            if on and "node_admin" not in raw:
                problems.append(
                    Problem(
                        f"cluster[{index}].{key}",
                        "needs the [node_admin] account (SET GLOBAL "
                        "wsrep_provider_options on a survivor); see docs/eviction.md",
                    )
                )
    return clusters


def _proxysql(
    values: Values, admin: Endpoint | None, problems: list[Problem]
) -> ProxySQLSettings | None:
    host = values.get("host")
    if isinstance(host, str) and (problem := host_problem(host)) is not None:
        problems.append(Problem("proxysql.host", problem))
    cluster_address = _proxy_address(values.get("cluster_address"), problems)
    if admin is None or problems:
        return None
    return ProxySQLSettings(
        host=values.text("host"),
        port=values.number("port"),
        endpoint=admin,
        cluster=values.text("cluster"),
        cluster_address=cluster_address,
    )
