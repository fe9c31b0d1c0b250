"""Configuration: TOML file < environment (CHECKER_*) < command line (--set), validated at once.

Every problem is reported together, each naming its key (`cluster[0].reader_hostgroup: ...`),
so an operator fixes a file in one round instead of one error per run.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checker_core.core.hostname import host_problem
from checker_core.core.keys import ENV_PREFIX, KEYS_BY_SECTION, SECTIONS
from checker_core.core.leadership import ProxyAddress
from checker_core.core.model import Hostgroups
from checker_core.core.schema import INT_MAX, Checker, Derived, Key, SslMode
from checker_core.core.settings import (
    ClusterSettings,
    Endpoint,
    ListenAddress,
    ProxySQLSettings,
    RunSettings,
    Secret,
    Settings,
    Tls,
)

CONFIG_ENV = "CHECKER_CONFIG"  # names the file itself; not a setting
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class Problem:
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


class ConfigError(Exception):
    """The configuration is unusable; `problems` lists every reason."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class _Text(str):
    """A value typed by a person in the environment or on the command line: parse it."""


# ---------------------------------------------------------------- reading and merging


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"


def _read_file(path: Path) -> dict[str, Any]:
    try:
        if path.is_dir():
            raise ConfigError([Problem("config", f"{path} is a directory, not a TOML file")])
        if path.exists() and not path.is_file():
            # a FIFO or a device would block the read, or never end
            raise ConfigError([Problem("config", f"{path} is not a regular file")])
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError([Problem("config", f"cannot read {path}: {reason}")]) from None
    if data.startswith(_UTF16_BOMS):
        raise ConfigError(
            [Problem("config", f"{path} is UTF-16 text; save it as UTF-8 (TOML is UTF-8)")]
        )
    # editors on some systems put a byte-order mark first; it carries no meaning in UTF-8
    data = data.removeprefix(_UTF8_BOM)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [Problem("config", f"{path} is not UTF-8 text (bad byte at offset {exc.start})")]
        ) from None
    if "\x00" in text:
        raise ConfigError([Problem("config", f"{path} holds NUL bytes: not a TOML text file")])
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([Problem("config", f"{path} is not valid TOML: {exc}")]) from None


def _suggest(word: str, candidates: Sequence[str]) -> str:
    import difflib  # only a bad file needs it

    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _parse_path(
    path: str, origin: str, problems: list[Problem]
) -> tuple[str, int | None, str] | None:
    """`section.key` or `cluster[N].key` -> (section, index, key)."""
    match = re.fullmatch(r"(\w+)(?:\[(\d+)\])?\.(\w+)", path)
    if not match:
        problems.append(Problem(origin, f"cannot read {path!r}: use section.key or cluster[N].key"))
        return None
    section, index, key = match.group(1), match.group(2), match.group(3)
    if section not in SECTIONS:
        problems.append(
            Problem(origin, f"unknown section {section!r}{_suggest(section, SECTIONS)}")
        )
        return None
    if (section == "cluster") != (index is not None):
        problems.append(
            Problem(origin, f"{path!r}: only cluster keys take an index, and they need one")
        )
        return None
    return section, None if index is None else int(index), key


def _env_overrides(env: Mapping[str, str], problems: list[Problem]) -> list[tuple[str, str, str]]:
    """CHECKER_<SECTION>_<KEY> and CHECKER_CLUSTER_<N>_<KEY> -> (origin, path, value)."""
    found: list[tuple[str, str, str]] = []
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == CONFIG_ENV:
            continue
        rest = var[len(ENV_PREFIX) :].lower()
        cluster = re.fullmatch(r"cluster_(\d+)_(\w+)", rest)
        if cluster:
            found.append((var, f"cluster[{cluster.group(1)}].{cluster.group(2)}", env[var]))
            continue
        section = next((s for s in SECTIONS if s != "cluster" and rest.startswith(s + "_")), None)
        if section is None:
            known = [
                f"{ENV_PREFIX}{s.upper()}_{k.upper()}"
                for s in SECTIONS
                if s != "cluster"
                for k in KEYS_BY_SECTION[s]
            ]
            problems.append(Problem(var, f"unknown environment variable{_suggest(var, known)}"))
            continue
        found.append((var, f"{section}.{rest[len(section) + 1 :]}", env[var]))
    return found


def _apply_overrides(
    raw: dict[str, Any], overrides: Sequence[tuple[str, str, str]], problems: list[Problem]
) -> dict[str, str]:
    """Put the values in `raw`; returns {key path: the variable or flag it came from}."""
    origins: dict[str, str] = {}
    for origin, path, value in overrides:
        parsed = _parse_path(path, origin, problems)
        if parsed is None:
            continue
        section, index, key = parsed
        if key not in KEYS_BY_SECTION[section]:
            known = list(KEYS_BY_SECTION[section])
            problems.append(Problem(origin, f"unknown key {section}.{key}{_suggest(key, known)}"))
            continue
        if section == "cluster":
            clusters = raw.get("cluster")
            assert index is not None
            if not isinstance(clusters, list) or index >= len(clusters):
                problems.append(Problem(origin, f"there is no cluster[{index}] in the file"))
                continue
            target = clusters[index]
        else:
            target = raw.setdefault(section, {})
        if isinstance(target, dict):
            target[key] = _Text(value)
            where = section if index is None else f"{section}[{index}]"
            origins[f"{where}.{key}"] = origin
    return origins


def _named_after_origin(problems: list[Problem], origins: Mapping[str, str]) -> list[Problem]:
    """A problem with a value from the environment or --set names where it came from, not only
    the key of a file that may not even hold it."""
    return [
        Problem(f"{origins[p.key]} ({p.key})", p.message) if p.key in origins else p
        for p in problems
    ]


# ---------------------------------------------------------------- validation


def _shown(key: Key, value: object) -> str:
    """A bad value as the message shows it: a secret's is never shown, not even a wrong one."""
    return "a value that is not shown (it is a secret)" if key.secret else repr(value)


def _coerce(key: Key, value: object, where: str, problems: list[Problem]) -> object:
    """Check one value against its Key; None when it is bad (the problem is recorded)."""
    if key.kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, _Text) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        problems.append(Problem(where, f"expected true or false, got {_shown(key, value)}"))
        return None
    if key.kind is int:
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, _Text) and re.fullmatch(r"\s*-?\d+\s*", value):
            number = int(value)
        if number is None:
            got = _shown(key, value)
            if isinstance(value, float) and value.is_integer():
                got += f" (write it as {int(value)}, without the decimal point)"
            problems.append(Problem(where, f"expected a whole number, got {got}"))
            return None
        if key.minimum is not None and number < key.minimum:
            problems.append(Problem(where, f"must be >= {key.minimum}, got {number}"))
            return None
        if key.maximum is not None and number > key.maximum:
            problems.append(Problem(where, f"must be <= {key.maximum}, got {number}"))
            return None
        return number
    if not isinstance(value, str):
        problems.append(Problem(where, f"expected a string, got {_shown(key, value)}"))
        return None
    text = str(value)
    if key.secret:
        # a line break or NUL cannot be part of a password any client sends
        if any(c in text for c in "\n\r\x00"):
            problems.append(Problem(where, "holds a line break or NUL character (not shown)"))
            return None
        return text
    if not text.strip():
        problems.append(Problem(where, "is empty"))
        return None
    if not text.isprintable() and (key.section, key.name) != ("cluster", "name"):
        # (a cluster name has a rule of its own, which says what may be in it)
        problems.append(Problem(where, f"{text!r} holds a control character (a line break?)"))
        return None
    if key.choices and text not in key.choices:
        problems.append(Problem(where, f"must be one of {', '.join(key.choices)}, got {text!r}"))
        return None
    return text


def _section_values(
    section: str,
    table: object,
    where: str,
    checker: Checker,
    problems: list[Problem],
) -> dict[str, object]:
    """Validated values of one table, defaults filled; a bad or missing key maps to None."""
    keys = KEYS_BY_SECTION[section]
    if not isinstance(table, dict):
        problems.append(Problem(where, f"expected a table, got {table!r}"))
        table = {}
    values: dict[str, object] = {}
    for name in table:
        key = keys.get(name)
        if key is None:
            problems.append(Problem(f"{where}.{name}", f"unknown key{_suggest(name, list(keys))}"))
        elif checker not in key.checkers:
            only = " and ".join(c.command for c in key.checkers)
            problems.append(Problem(f"{where}.{name}", f"only {only} uses this key"))
    for name, key in keys.items():
        if checker not in key.checkers:
            values[name] = key.default
            continue
        if name in table:
            values[name] = _coerce(key, table[name], f"{where}.{name}", problems)
        elif key.required:
            problems.append(Problem(f"{where}.{name}", "missing (required)"))
            values[name] = None
        else:
            values[name] = key.default
    return values


def _password(
    values: dict[str, object], where: str, problems: list[Problem], warnings: list[str]
) -> Secret | None:
    inline, path = values.get("password"), values.get("password_file")
    if inline is not None and path is not None:
        problems.append(Problem(f"{where}.password", "set password or password_file, not both"))
        return None
    if path is not None:
        return _password_file(Path(str(path)), f"{where}.password_file", problems, warnings)
    if inline is None:
        given = (f"{where}.password", f"{where}.password_file")
        if any(p.key in given for p in problems):
            return None  # given, but bad: that problem is already said, and it is not missing
        problems.append(Problem(f"{where}.password", "missing (set password or password_file)"))
        return None
    return Secret(str(inline))


def _password_file(
    path: Path, where: str, problems: list[Problem], warnings: list[str]
) -> Secret | None:
    if not path.is_absolute():
        warnings.append(
            f"{where} {path} is relative: it is read from the working directory, which is "
            "not this one when ProxySQL's scheduler or systemd runs the checker; use an "
            "absolute path"
        )
    try:
        if path.is_dir():
            problems.append(Problem(where, f"{path} is a directory, not a file"))
            return None
        if path.exists() and not path.is_file():
            problems.append(Problem(where, f"{path} is not a regular file"))
            return None
        data = path.read_bytes()
        mode = path.stat().st_mode
    except OSError as exc:
        problems.append(Problem(where, f"cannot read {path}: {exc.strerror or exc}"))
        return None
    if mode & stat.S_IWOTH:
        warnings.append(f"{where} {path} is writable by every user: chmod 600 {path}")
    try:
        text = data.removeprefix(_UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError:
        problems.append(Problem(where, f"{path} is not UTF-8 text (a binary file?)"))
        return None
    lines = text.splitlines()
    if not lines or not lines[0]:
        problems.append(Problem(where, f"{path} is empty (the first line is the password)"))
        return None
    if "\x00" in lines[0]:
        problems.append(Problem(where, f"{path} holds a NUL byte (a binary file?)"))
        return None
    return Secret(lines[0])


def _tls(
    values: dict[str, object], where: str, problems: list[Problem], warnings: list[str]
) -> Tls | None:
    paths = {name: values.get(name) for name in ("ssl_ca", "ssl_cert", "ssl_key")}
    missing = False
    for name, path in paths.items():
        if path is not None and not Path(str(path)).is_file():
            problems.append(Problem(f"{where}.{name}", f"no such file: {path}"))
            missing = True
    if (paths["ssl_cert"] is None) != (paths["ssl_key"] is None):
        problems.append(Problem(f"{where}.ssl_cert", "ssl_cert and ssl_key go together"))
    elif not missing and any(p is not None for p in paths.values()):
        # loaded now, as a connect would: garbage is a configuration error, not a blind pass
        from checker_core.edges.tls import file_problems

        for failure in file_problems(*(None if p is None else str(p) for p in paths.values())):
            problems.append(Problem(f"{where}.{failure.key}", f"{failure.path}: {failure.reason}"))
    if not isinstance(values.get("ssl_mode"), str):
        return None  # a bad ssl_mode is already a problem
    mode = SslMode(values["ssl_mode"])
    if mode.verifies and paths["ssl_ca"] is None:
        problems.append(
            Problem(
                f"{where}.ssl_mode",
                f'"{mode.value}" needs {where}.ssl_ca (the CA that signed the server\'s '
                "certificate)",
            )
        )
        return None
    given = [name for name, path in paths.items() if path is not None]
    if mode is SslMode.DISABLED and given:
        warnings.append(
            f'{where}.ssl_mode is "disabled": {", ".join(f"{where}.{n}" for n in given)} not used'
        )
    elif not mode.verifies and paths["ssl_ca"] is not None:
        # as MySQL's own clients warn: a CA alone verifies nothing
        warnings.append(
            f'{where}.ssl_mode is "{mode.value}": the server is not verified against '
            f'{where}.ssl_ca; set ssl_mode = "verify_ca" or "verify_identity" for that'
        )
    return Tls(mode, *(None if p is None else str(p) for p in paths.values()))


def _endpoint(
    values: dict[str, object], where: str, problems: list[Problem], warnings: list[str]
) -> Endpoint | None:
    password = _password(values, where, problems, warnings)
    tls = _tls(values, where, problems, warnings)
    fields_ok = all(
        values[k] is not None for k in ("user", "connect_timeout_ms", "read_timeout_ms")
    )
    if password is None or tls is None or not fields_ok:
        return None
    return Endpoint(
        user=str(values["user"]),
        password=password,
        tls=tls,
        connect_timeout_ms=int(str(values["connect_timeout_ms"])),
        read_timeout_ms=int(str(values["read_timeout_ms"])),
    )


def _node_admin(
    table: object, checker: Checker, problems: list[Problem], warnings: list[str]
) -> Endpoint | None:
    """The optional [node_admin] account: absent, no action on the nodes is allowed."""
    if table is None:
        return None
    values = _section_values("node_admin", table, "node_admin", checker, problems)
    if values["user"] is None:
        if not any(p.key == "node_admin.user" for p in problems):  # given, but bad: said
            problems.append(
                Problem("node_admin.user", "missing (required when [node_admin] is set)")
            )
        return None
    return _endpoint(values, "node_admin", problems, warnings)


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
    values = _section_values("cluster", table, where, checker, problems)
    ok = True
    name = values["name"]
    if isinstance(name, str):
        if not CLUSTER_NAME.fullmatch(name):
            problems.append(Problem(f"{where}.name", f"{name!r}: use 1-64 of A-Z a-z 0-9 _ . -"))
            ok = False
        elif name in names:
            problems.append(Problem(f"{where}.name", f"{name!r} is already {names[name]}.name"))
            ok = False
        else:
            names[name] = where
    derived_from: dict[str, str] = {}
    for key, base, marker in (
        ("config_writer_hostgroup", "writer_hostgroup", Derived.CONFIG_WRITER),
        ("config_reader_hostgroup", "reader_hostgroup", Derived.CONFIG_READER),
    ):
        if values[key] is marker:
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
    if not ok or any(v is None for k, v in values.items() if k != "main_segment"):
        return None
    return ClusterSettings(
        name=str(values["name"]),
        hostgroups=Hostgroups(*(int(str(values[k])) for k in _HOSTGROUP_KEYS)),
        max_writers=int(str(values["max_writers"])),
        writer_is_also_reader=int(str(values["writer_is_also_reader"])),
        max_transactions_behind=int(str(values["max_transactions_behind"])),
        retry_up=int(str(values["retry_up"])),
        retry_down=int(str(values["retry_down"])),
        fail_back=bool(values["fail_back"]),
        kill_demoted_writer_connections=bool(values["kill_demoted_writer_connections"]),
        drain_timeout_ms=int(str(values["drain_timeout_ms"])),
        main_segment=None if values["main_segment"] is None else int(str(values["main_segment"])),
        brownout=str(values["brownout"]),
        evict_dead_nodes=bool(values["evict_dead_nodes"]),
        unresponsive_after_ms=int(str(values["unresponsive_after_ms"]))
        if values["evict_unresponsive_nodes"]
        else 0,
    )


def _run(values: dict[str, object], problems: list[Problem]) -> RunSettings | None:
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
    if isinstance(state_dir, str):
        path = Path(state_dir)
        if not path.is_absolute():
            problems.append(
                Problem(
                    "run.state_dir",
                    f"{state_dir!r} must be an absolute path "
                    "(the scheduler runs with no working directory of ours)",
                )
            )
            return None
        if path.exists() and not path.is_dir():
            problems.append(Problem("run.state_dir", f"{state_dir} exists and is not a directory"))
            return None
        blocker = _state_dir_blocker(path)
        if blocker is not None:
            problems.append(Problem("run.state_dir", blocker))
            return None
    listen: ListenAddress | None = None
    if isinstance(values["metrics_listen"], str):
        text = values["metrics_listen"]
        if any(c.isspace() for c in text):
            problems.append(
                Problem("run.metrics_listen", f"{text!r} holds a space: expected HOST:PORT")
            )
            return None
        try:
            listen = ListenAddress.parse(values["metrics_listen"])
        except ValueError as exc:
            problems.append(Problem("run.metrics_listen", str(exc)))
            return None
    if any(v is None for k, v in values.items() if k != "metrics_listen"):
        return None
    return RunSettings(
        interval_ms=int(str(interval)),
        max_runtime_ms=int(str(runtime)),
        state_dir=Path(str(state_dir)),
        persist=bool(values["persist"]),
        log_format=str(values["log_format"]),
        log_level=str(values["log_level"]),
        log_stream=str(values["log_stream"]),
        metrics_listen=listen,
        watch_interval_ms=int(str(values["watch_interval_ms"])),
    )


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


def _secret_on_argv(path: str) -> str | None:
    """Why `--set path=...` is refused when path is a secret key: every user of the host reads
    a command line (ps, /proc)."""
    match = re.fullmatch(r"(\w+)\.(\w+)", path)
    if match is None:
        return None
    section, name = match.groups()
    key = KEYS_BY_SECTION.get(section, {}).get(name)
    if key is None or not key.secret:
        return None
    env = f"{ENV_PREFIX}{section.upper()}_{name.upper()}"
    return (
        "a password on the command line is visible to every user of this host (ps); "
        f"put it in a file named by {section}.{name}_file, or in the environment as {env}"
    )


def load(
    path: str | Path,
    checker: Checker,
    env: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
) -> Settings:
    """Read, merge and validate; raise ConfigError listing every problem."""
    source = Path(path)
    raw = _read_file(source)
    problems: list[Problem] = []
    if isinstance(raw.get("cluster"), dict):  # a single [cluster] table reads as one cluster
        raw["cluster"] = [raw["cluster"]]
    env_pairs = _env_overrides(os.environ if env is None else env, problems)
    cli_pairs: list[tuple[str, str, str]] = []
    for item in overrides:
        target, sep, value = item.partition("=")
        if not sep:
            problems.append(Problem("--set", f"{item!r}: expected KEY=VALUE"))
            continue
        name = target.strip()
        secret = _secret_on_argv(name)
        if secret is not None:
            problems.append(Problem(f"--set {name}", secret))
            continue
        cli_pairs.append((f"--set {name}", name, value))
    origins = _apply_overrides(raw, env_pairs + cli_pairs, problems)

    for section in raw:
        if section not in SECTIONS:
            problems.append(Problem(section, f"unknown section{_suggest(section, SECTIONS)}"))
    proxysql_values = _section_values(
        "proxysql", raw.get("proxysql", {}), "proxysql", checker, problems
    )
    tls_warnings: list[str] = []
    proxysql_endpoint = _endpoint(proxysql_values, "proxysql", problems, tls_warnings)
    monitor = _endpoint(
        _section_values("monitor", raw.get("monitor", {}), "monitor", checker, problems),
        "monitor",
        problems,
        tls_warnings,
    )
    node_admin = _node_admin(raw.get("node_admin"), checker, problems, tls_warnings)
    run = _run(_section_values("run", raw.get("run", {}), "run", checker, problems), problems)
    if monitor is not None and run is not None and monitor.connect_timeout_ms >= run.max_runtime_ms:
        problems.append(
            Problem(
                "monitor.connect_timeout_ms",
                f"{monitor.connect_timeout_ms} must be below "
                f"run.max_runtime_ms ({run.max_runtime_ms})",
            )
        )

    tables = raw.get("cluster")
    clusters: list[ClusterSettings] = []
    if tables is None:
        problems.append(
            Problem("cluster", "no [[cluster]] table: at least one cluster is required")
        )
    elif not isinstance(tables, list):
        problems.append(Problem("cluster", "expected [[cluster]] tables"))
    elif not tables:
        problems.append(
            Problem("cluster", "an empty list: at least one [[cluster]] table is required")
        )
    else:
        used: dict[int, str] = {}
        names: dict[str, str] = {}
        for index, table in enumerate(tables):
            cluster = _cluster(
                index, table, checker=checker, used=used, names=names, problems=problems
            )
            if cluster is not None:
                clusters.append(cluster)
            evicting = (
                ()
                if cluster is None
                else (
                    ("evict_dead_nodes", cluster.evict_dead_nodes),
                    ("evict_unresponsive_nodes", cluster.unresponsive_after_ms > 0),
                )
            )
            for key, on in evicting:
                if on and "node_admin" not in raw:
                    problems.append(
                        Problem(
                            f"cluster[{index}].{key}",
                            "needs the [node_admin] account (SET GLOBAL "
                            "wsrep_provider_options on a survivor); see docs/eviction.md",
                        )
                    )

    host = proxysql_values.get("host")
    if isinstance(host, str) and (problem := host_problem(host)) is not None:
        problems.append(Problem("proxysql.host", problem))
    cluster_address = _proxy_address(proxysql_values.get("cluster_address"), problems)

    if problems:
        raise ConfigError(_named_after_origin(problems, origins))
    assert proxysql_endpoint is not None and monitor is not None and run is not None
    return Settings(
        checker=checker,
        source=source.resolve(),
        proxysql=ProxySQLSettings(
            host=str(proxysql_values["host"]),
            port=int(str(proxysql_values["port"])),
            endpoint=proxysql_endpoint,
            cluster=str(proxysql_values["cluster"]),
            cluster_address=cluster_address,
        ),
        monitor=monitor,
        run=run,
        clusters=tuple(clusters),
        node_admin=node_admin,
        warnings=_file_warnings(source, raw)
        + tuple(tls_warnings)
        + tuple(_timing_warnings(monitor, proxysql_endpoint, run))
        + tuple(_silence_warnings(monitor, clusters)),
    )
