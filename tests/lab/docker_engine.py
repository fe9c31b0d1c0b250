"""The lab's Docker engine and the local base image the container tests build on.

    python -m tests.lab docker up|down|status

`up` starts `dockerd` when no engine answers (in its own session, pid file under
lab_dir()/docker, log beside it) and builds the local base image once: no image registry is
reachable from the lab machines, so the base is a Debian bookworm made by `debootstrap
--variant=minbase` from the mirror apt already uses, imported as BASE_IMAGE. `down` stops the
dockerd that `up` started, and only that one; an engine someone else runs is left alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.lab import process
from tests.lab.apt_sources import SUITE, apt_mirror
from tests.lab.paths import cache_dir, lab_dir

BASE_IMAGE = "proxysql-checkers-base:bookworm"
DEBIAN_CLI = Path("/usr/bin/docker")  # Debian's docker.io CLI: builds with BuildKit built in

READY_TIMEOUT = 90.0
STOP_TIMEOUT = 60.0
ANSWER_TIMEOUT = 10.0
DEBOOTSTRAP_TIMEOUT = 900.0
IMPORT_TIMEOUT = 300.0
BUILD_TIMEOUT = 900.0
# what pip inside a build trusts: the CA bundle the host's own pip uses, which also holds the
# CA of a TLS-intercepting proxy where there is one (a build secret: never in a layer)
CA_BUNDLES = (os.environ.get("PIP_CERT", ""), "/etc/ssl/certs/ca-certificates.crt")
# what a minbase root file system carries that an image never needs: the downloaded .debs
# and the package lists (a build runs apt-get update anyway)
PRUNED = ("var/cache/apt/archives", "var/lib/apt/lists")


def docker_cli() -> str:
    """DOCKER_CLI if set, else Debian's CLI (a CLI without buildx cannot build with BuildKit),
    else `docker` on PATH."""
    configured = os.environ.get("DOCKER_CLI")
    if configured:
        return configured
    if DEBIAN_CLI.is_file():
        return str(DEBIAN_CLI)
    return shutil.which("docker") or "docker"


def docker(
    *args: str,
    timeout: float = 120.0,
    check: bool = True,
    stdin: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI; with `check`, a failure raises LabError carrying its output."""
    try:
        done = subprocess.run(
            [docker_cli(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=stdin,
            env=None if env is None else {**os.environ, **env},
        )
    except FileNotFoundError as exc:
        raise process.LabError(f"no docker CLI ({exc.filename})") from exc
    except subprocess.TimeoutExpired as exc:
        raise process.LabError(f"docker {' '.join(args[:2])} took over {timeout:.0f}s") from exc
    if check and done.returncode != 0:
        raise process.LabError(
            f"docker {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return done


def engine_answers() -> bool:
    try:
        done = docker("version", "--format", "{{.Server.Version}}", timeout=ANSWER_TIMEOUT)
    except process.LabError:
        return False
    return bool(done.stdout.strip())


def image_exists(tag: str) -> bool:
    try:
        return docker("image", "inspect", tag, timeout=ANSWER_TIMEOUT, check=False).returncode == 0
    except process.LabError:
        return False


class DockerEngine:
    """Start, find and stop the lab's dockerd; make the local base image."""

    def __init__(self) -> None:
        self.dir = lab_dir() / "docker"
        self.pid_path = self.dir / "dockerd.pid"
        self.log_path = self.dir / "dockerd.log"
        self._lock_path = self.dir / ".lock"

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        """Serialise up/down/base across processes: two test runs must not both start one."""
        return process.locked(self._lock_path)

    def pid(self) -> int | None:
        """The dockerd this lab started, if it still runs."""
        return process.tracked_pid(self.pid_path, "dockerd")

    def up(self) -> bool:
        """An engine that answers; True when this call started it."""
        with self._locked():
            if engine_answers():
                return False
            binary = shutil.which("dockerd")
            if binary is None:
                raise process.LabError("no Docker engine answers and dockerd is not installed")
            pid = self.pid()
            if pid is not None:
                # ours, but not answering: a half-started or wedged engine is restarted
                process.stop(pid, STOP_TIMEOUT)
            pid = process.spawn([binary], self.log_path, self.pid_path)

            def ready() -> bool:
                if not process.pid_alive(pid):
                    raise process.LabError(f"dockerd exited while starting; see {self.log_path}")
                return engine_answers()

            process.wait_until(ready, READY_TIMEOUT, "dockerd to answer", interval=0.5)
            return True

    def down(self) -> bool:
        """Stop the dockerd `up` started (its containers stop with it); True if one was."""
        with self._locked():
            pid = self.pid()
            if pid is None:
                self.pid_path.unlink(missing_ok=True)
                return False
            process.stop(pid, STOP_TIMEOUT)
            self.pid_path.unlink(missing_ok=True)
            return True

    def ensure_base(self, tag: str = BASE_IMAGE) -> bool:
        """The local base image, made once; True when this call made it."""
        with self._locked():
            if image_exists(tag):
                return False
            build_base(tag)
            return True


def build_base(tag: str, mirror: str | None = None) -> None:
    """debootstrap a minbase bookworm from the apt mirror and import it as `tag`."""
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise process.LabError("debootstrap is not installed (apt-get install debootstrap)")
    mirror = mirror or apt_mirror()
    # under the cache, not /tmp: a few hundred MB that must not fill a tmpfs
    with tempfile.TemporaryDirectory(prefix="rootfs-", dir=cache_dir()) as tmp:
        root = Path(tmp) / "root"
        log = Path(tmp) / "debootstrap.log"
        with open(log, "w") as out:
            done = subprocess.run(
                [debootstrap, "--variant=minbase", SUITE, str(root), mirror],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=DEBOOTSTRAP_TIMEOUT,
                check=False,
            )
        if done.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise process.LabError(f"debootstrap from {mirror} failed:\n{tail}")
        for sub in PRUNED:
            for entry in (root / sub).glob("*"):
                if entry.is_file():
                    entry.unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        try:
            docker("import", "-", tag, timeout=IMPORT_TIMEOUT, stdin=tar.stdout.fileno())
        finally:
            tar.stdout.close()
            tar.wait(timeout=IMPORT_TIMEOUT)


def build_image(
    context: Path,
    tag: str,
    build_args: dict[str, str] | None = None,
    *,
    dockerfile: Path | None = None,
) -> None:
    """`docker build` with BuildKit (the Dockerfile mounts and secrets need it), the host's CA
    bundle as the `pip_ca` secret, layers cached by the engine between runs."""
    argv = ["build", "--progress=plain", "-t", tag]
    for key, value in (build_args or {}).items():
        argv += ["--build-arg", f"{key}={value}"]
    bundle = next((p for p in CA_BUNDLES if p and Path(p).is_file()), None)
    if bundle is not None:
        argv += ["--secret", f"id=pip_ca,src={bundle}"]
    if dockerfile is not None:
        argv += ["-f", str(dockerfile)]
    argv.append(str(context))
    done = docker(*argv, timeout=BUILD_TIMEOUT, check=False, env={"DOCKER_BUILDKIT": "1"})
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        raise process.LabError(f"docker build -t {tag} {context} failed:\n{tail}")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.lab docker",
        description="The lab's Docker engine (started when none answers) and its base image",
    )
    parser.add_argument("command", choices=("up", "down", "status"))
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    engine = DockerEngine()
    try:
        if args.command == "up":
            started = engine.up()
            print("dockerd started" if started else "a Docker engine already answers")
            made = engine.ensure_base()
            print(f"{BASE_IMAGE}: {'built' if made else 'cached'}")
            return 0
        if args.command == "down":
            print("dockerd stopped" if engine.down() else "no dockerd of the lab was running")
            return 0
        if not engine_answers():
            print("Docker engine: not answering")
            return 1
        pid = engine.pid()
        owner = f"started by the lab, pid {pid}" if pid else "not started by the lab"
        base = "present" if image_exists(BASE_IMAGE) else "missing"
        print(f"Docker engine: answering ({owner}); {BASE_IMAGE}: {base}")
        return 0
    except process.LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
