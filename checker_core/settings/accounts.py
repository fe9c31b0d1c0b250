"""The accounts a checker logs in with ([proxysql], [monitor], [node_admin]): user, password
(inline or from a file) and TLS, each checked as a connect would use it."""

from __future__ import annotations

import stat
from pathlib import Path

from checker_core.core.schema import Checker, SslMode
from checker_core.core.settings import Endpoint, Secret, Tls
from checker_core.settings.problems import Problem
from checker_core.settings.sources import UTF8_BOM
from checker_core.settings.values import Values, section_values


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
        text = data.removeprefix(UTF8_BOM).decode("utf-8")
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


def endpoint(
    values: Values, where: str, problems: list[Problem], warnings: list[str]
) -> Endpoint | None:
    password = _password(values, where, problems, warnings)
    tls = _tls(values, where, problems, warnings)
    fields_ok = all(
        values[k] is not None for k in ("user", "connect_timeout_ms", "read_timeout_ms")
    )
    if password is None or tls is None or not fields_ok:
        return None
    return Endpoint(
        user=values.text("user"),
        password=password,
        tls=tls,
        connect_timeout_ms=values.number("connect_timeout_ms"),
        read_timeout_ms=values.number("read_timeout_ms"),
    )


def node_admin(
    table: object, checker: Checker, problems: list[Problem], warnings: list[str]
) -> Endpoint | None:
    """The optional [node_admin] account: absent, no action on the nodes is allowed."""
    if table is None:
        return None
    values = section_values("node_admin", table, "node_admin", checker, problems)
    if values["user"] is None:
        if not any(p.key == "node_admin.user" for p in problems):  # given, but bad: said
            problems.append(
                Problem("node_admin.user", "missing (required when [node_admin] is set)")
            )
        return None
    return endpoint(values, "node_admin", problems, warnings)
