"""Where a configuration comes from: the TOML file, the environment (CHECKER_*) and --set, merged
in that order; each value remembers the variable or flag it came from."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from checker_core.core.keys import ENV_PREFIX, KEYS_BY_SECTION, SECTIONS
from checker_core.settings.problems import ConfigError, Problem, Text

if TYPE_CHECKING:
    from pathlib import Path

CONFIG_ENV = "CHECKER_CONFIG"  # names the file itself; not a setting


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
UTF8_BOM = b"\xef\xbb\xbf"


def read_file(path: Path) -> dict[str, Any]:
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
    data = data.removeprefix(UTF8_BOM)
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


def suggest(word: str, candidates: Sequence[str]) -> str:
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
        problems.append(Problem(origin, f"unknown section {section!r}{suggest(section, SECTIONS)}"))
        return None
    if (section == "cluster") != (index is not None):
        problems.append(
            Problem(origin, f"{path!r}: only cluster keys take an index, and they need one")
        )
        return None
    return section, None if index is None else int(index), key


def env_overrides(env: Mapping[str, str], problems: list[Problem]) -> list[tuple[str, str, str]]:
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
            problems.append(Problem(var, f"unknown environment variable{suggest(var, known)}"))
            continue
        found.append((var, f"{section}.{rest[len(section) + 1 :]}", env[var]))
    return found


def apply_overrides(
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
            problems.append(Problem(origin, f"unknown key {section}.{key}{suggest(key, known)}"))
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
            target[key] = Text(value)
            where = section if index is None else f"{section}[{index}]"
            origins[f"{where}.{key}"] = origin
    return origins


def named_after_origin(problems: list[Problem], origins: Mapping[str, str]) -> list[Problem]:
    """A problem with a value from the environment or --set names where it came from, not only
    the key of a file that may not even hold it."""
    return [
        Problem(f"{origins[p.key]} ({p.key})", p.message) if p.key in origins else p
        for p in problems
    ]


def cli_overrides(overrides: Sequence[str], problems: list[Problem]) -> list[tuple[str, str, str]]:
    """`--set KEY=VALUE` items -> (origin, path, value); a secret is refused on the command
    line."""
    found: list[tuple[str, str, str]] = []
    for item in overrides:
        target, sep, value = item.partition("=")
        if not sep:
            problems.append(Problem("--set", f"{item!r}: expected KEY=VALUE"))
            continue
        name = target.strip()
        secret = secret_on_argv(name)
        if secret is not None:
            problems.append(Problem(f"--set {name}", secret))
            continue
        found.append((f"--set {name}", name, value))
    return found


def secret_on_argv(path: str) -> str | None:
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
