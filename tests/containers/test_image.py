"""The image really built (the project's Dockerfile on the local Debian base) and really run.

- as built: the non-root user, the entry point, the HEALTHCHECK, and the Kubernetes example's
  pod spec checked against what `docker inspect` says (user, ports, probe paths, env names),
  then the image run as that pod runs it (read-only root, no capabilities, its mounts);
- on the lab (its Galera cluster and ProxySQL admin endpoint; host network, so the container
  reaches them on 127.0.0.1): HEALTHCHECK turns healthy, JSON lines on stdout, a writer failover
  made by the container, `docker kill -s HUP` reloads, `docker stop` ends it with exit 0.
"""

from __future__ import annotations

import json
import os
import posixpath
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checker_core.core.keys import KEYS
from checker_core.core.model import NodeAddress
from checker_core.core.settings import ListenAddress
from tests.integration.rig import Rig, parse_logs
from tests.lab.process import LabError, free_port, wait_until
from tests.packaging.test_container import (
    checker_container,
    checker_toml,
    mounted_files,
    one,
    pod_spec,
    port_number,
    secret_values,
)

pytestmark = [pytest.mark.docker]

UID = 10001  # the image's USER, numeric
HEALTHY_TIMEOUT = 120.0  # the image's HEALTHCHECK: 15 s interval, 30 s start period
PASS_TIMEOUT = 60.0
STOP_TIMEOUT = 30


def docker_client() -> Any:
    import docker

    return docker.from_env()


def image_config(tag: str) -> dict[str, Any]:
    config: dict[str, Any] = docker_client().images.get(tag).attrs["Config"]
    return config


def image_env(config: dict[str, Any]) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in config.get("Env") or [])


@pytest.fixture
def run_image(checker_image: str) -> Iterator[Any]:
    """run_image(**docker_run_kwargs) -> a started container of the image, removed after."""
    started: list[Any] = []

    def run(**kwargs: Any) -> Any:
        container = docker_client().containers.run(checker_image, detach=True, **kwargs)
        started.append(container)
        return container

    yield run
    for container in started:
        try:
            container.remove(force=True, v=True)  # v: the image's state VOLUME too
        except Exception as exc:  # a container already gone is fine
            print(f"removing {container.short_id}: {exc}")


def stdout_lines(container: Any) -> list[dict[str, Any]]:
    return parse_logs(container.logs(stdout=True, stderr=False).decode(errors="replace"))


def wait_for_line(container: Any, match: Any, what: str, timeout: float = PASS_TIMEOUT) -> Any:
    def found() -> Any:
        container.reload()
        if container.status == "exited":
            raise AssertionError(f"the container exited: {container.logs().decode()[-3000:]}")
        return next((e for e in stdout_lines(container) if match(e)), None)

    try:
        return wait_until(found, timeout, what, interval=0.5)
    except LabError as exc:
        raise AssertionError(f"{exc}\n{container.logs().decode()[-3000:]}") from None


# ============================================================================ the image as built


def test_image_runs_as_the_non_root_user(checker_image: str, run_image: Any) -> None:
    config = image_config(checker_image)
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["galera-checker"]
    assert config["Cmd"] == ["daemon"]
    assert config["Healthcheck"]["Test"] == ["CMD", "galera-checker", "healthcheck"]
    container = run_image(entrypoint=["id"])
    assert container.wait(timeout=60)["StatusCode"] == 0
    assert container.logs().decode().split()[:2] == [
        f"uid={UID}(proxysql-checkers)",
        f"gid={UID}(proxysql-checkers)",
    ]
    # both checkers are commands on the image's PATH
    for program in ("galera-checker", "gr-checker"):
        done = run_image(entrypoint=[program], command=["--help"])
        assert done.wait(timeout=60)["StatusCode"] == 0, done.logs().decode()


def test_kubernetes_example_matches_the_built_image(checker_image: str) -> None:
    config = image_config(checker_image)
    env = image_env(config)
    spec, container = pod_spec(), checker_container()
    context = container["securityContext"]
    user, _, group = config["User"].partition(":")
    assert (context["runAsUser"], context["runAsGroup"]) == (int(user), int(group))
    assert context["runAsNonRoot"] and int(user) != 0
    assert spec["securityContext"]["fsGroup"] == int(group), "the Secret files' group"
    # the image's own command, or the documented Group Replication override
    assert container.get("command", config["Entrypoint"]) in (config["Entrypoint"], ["gr-checker"])
    assert container.get("args", config["Cmd"]) == config["Cmd"]
    # ports and probes: the image listens where the probes and the scrape ask
    listen = ListenAddress.parse(env["CHECKER_RUN_METRICS_LISTEN"])
    assert set(config["ExposedPorts"]) == {f"{listen.port}/tcp"}
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == "/health", probe
        assert port_number(container, get["port"]) == listen.port, probe
    annotations = one_template_annotations()
    assert int(annotations["prometheus.io/port"]) == listen.port
    assert annotations["prometheus.io/path"] == "/metrics"
    # env names: what the pod sets is a setting the image knows; what it relies on is set
    known = {f"CHECKER_{k.section.upper()}_{k.name.upper()}" for k in KEYS} | {"CHECKER_CONFIG"}
    names = {e["name"] for e in container.get("env", [])}
    assert not {n for n in names if n.startswith("CHECKER_")} - known
    assert {n for n in env if n.startswith("CHECKER_")} <= known
    assert env["CHECKER_RUN_LOG_FORMAT"] == "json" and env["CHECKER_RUN_LOG_STREAM"] == "stdout"
    # mounts: the config where the image reads it, the state dir on the image's volume
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert posixpath.dirname(env["CHECKER_CONFIG"]) in mounts
    assert env["CHECKER_RUN_STATE_DIR"] in mounts
    assert set(config["Volumes"]) == {env["CHECKER_RUN_STATE_DIR"]}
    assert config["WorkingDir"] == env["CHECKER_RUN_STATE_DIR"]


def one_template_annotations() -> dict[str, str]:
    annotations: dict[str, str] = one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    return annotations


def test_image_runs_under_the_kubernetes_security_context(
    checker_image: str, run_image: Any, tmp_path: Path
) -> None:
    """The pod's checker container, as Docker can run it: its user, a read-only root, no
    capabilities, the ConfigMap and Secret files mounted where the pod mounts them, an empty
    writable state dir. No ProxySQL here (no network): the daemon runs, /metrics answers and
    /health answers 503 with its reason, on the port the probes use."""
    env = image_env(image_config(checker_image))
    container = checker_container()
    context = container["securityContext"]
    text, config = checker_toml()
    files = mounted_files(container)
    volumes: dict[str, dict[str, str]] = {}
    for mount in container["volumeMounts"]:
        target = mount["mountPath"]
        if target == env["CHECKER_RUN_STATE_DIR"]:
            continue
        local = tmp_path / mount["name"]
        local.mkdir()
        for path, mounted in files.items():
            if posixpath.dirname(path) != target:
                continue
            if mounted.kind == "ConfigMap":
                (local / posixpath.basename(path)).write_text(text)
            else:
                secret = local / posixpath.basename(path)
                secret.write_text(secret_values(mounted.name)[mounted.key])
                os.chown(secret, 0, context["runAsGroup"])
                secret.chmod(0o440)  # the Secret volume's defaultMode, group fsGroup
        local.chmod(0o755)
        volumes[str(local)] = {"bind": target, "mode": "ro" if mount.get("readOnly") else "rw"}
    state = f"uid={context['runAsUser']},gid={context['runAsGroup']},mode=0750"
    running = run_image(
        user=f"{context['runAsUser']}:{context['runAsGroup']}",
        read_only=context["readOnlyRootFilesystem"],
        cap_drop=context["capabilities"]["drop"],
        security_opt=["no-new-privileges"],
        network_mode="none",
        volumes=volumes,
        tmpfs={env["CHECKER_RUN_STATE_DIR"]: state},
    )
    port = ListenAddress.parse(env["CHECKER_RUN_METRICS_LISTEN"]).port
    assert config["proxysql"]["host"] == "127.0.0.1"
    script = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n"
        f"    r = urllib.request.urlopen('http://127.0.0.1:{port}' + sys.argv[1], timeout=3)\n"
        "    print(r.status, r.read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code, e.read().decode())\n"
    )

    def get(path: str) -> tuple[int, str] | None:
        running.reload()
        assert running.status != "exited", running.logs().decode()[-3000:]
        code, out = running.exec_run(
            ["python3", "-c", script, path], user=str(context["runAsUser"])
        )
        if code != 0:
            return None  # the listener is not up yet
        status, _, body = out.decode().partition(" ")
        return int(status), body

    def health_after_a_pass() -> tuple[int, str] | None:
        found = get("/health")
        if found is None or "no pass finished yet" in found[1]:
            return None  # the listener may answer before the first pass has ended
        return found

    health = wait_until(health_after_a_pass, PASS_TIMEOUT, "/health after the first pass", 0.5)
    assert health[0] == 503, health
    assert "unreachable" in json.loads(health[1])["reason"], health
    metrics = get("/metrics")
    assert metrics is not None and metrics[0] == 200
    assert "proxysql_checker_" in metrics[1]
    assert any(e.get("event") == "pass" for e in stdout_lines(running))


# ============================================================================ the image on the lab


@pytest.mark.galera
@pytest.mark.proxysql
def test_container_keeps_the_lab_right_and_obeys_docker(
    rig: Rig, galera: Any, nodes: list[NodeAddress], run_image: Any, tmp_path: Path
) -> None:
    """The rig fixture: the lab's Galera cluster and ProxySQL admin endpoint, the roster seeded
    (weights 1000/500/100). The container gets the rig's configuration file, mounted read-only
    at the same path, and keeps the image's environment but for the listener: on the host's
    network the image's 0.0.0.0:9140 would be shared with the whole machine."""
    n1, n2, _ = nodes
    rig.write_config()
    for path in (rig.config, *(tmp_path / "secrets").iterdir()):
        os.chown(path, UID, UID)
        path.chmod(0o600)
    tmp_path.chmod(0o755)
    port = free_port()
    container = run_image(
        network_mode="host",
        environment={
            "CHECKER_CONFIG": str(rig.config),
            "CHECKER_RUN_METRICS_LISTEN": f"127.0.0.1:{port}",
        },
        volumes={str(tmp_path): {"bind": str(tmp_path), "mode": "ro"}},
    )

    # the image's HEALTHCHECK, unchanged, turns healthy
    def health() -> str | None:
        container.reload()
        assert container.status != "exited", container.logs().decode()[-3000:]
        status = container.attrs["State"].get("Health", {}).get("Status")
        return str(status) if status == "healthy" else None

    wait_until(health, HEALTHY_TIMEOUT, "the container's HEALTHCHECK to pass", 1.0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
        assert answer.status == 200

    # JSON lines on stdout: every line of stdout is one, nothing on stderr
    first = wait_for_line(container, lambda e: e.get("event") == "pass", "a pass line")
    assert first["checker"] == "galera"
    raw = container.logs(stdout=True, stderr=False).decode().splitlines()
    assert raw and all(json.loads(line) for line in raw)
    assert container.logs(stdout=False, stderr=True).decode().strip() == ""
    assert rig.writers == {n1}

    # a writer failover, made by the container
    galera.kill(1)
    wait_until(lambda: rig.writers == {n2}, PASS_TIMEOUT, "the container to promote node2")
    wait_for_line(
        container,
        lambda e: e.get("event") == "pass" and f"writer {n2} (was {n1})" in str(e.get("summary")),
        "the failover's pass line",
    )

    # docker kill -s HUP: the file is read again (a new interval here)
    rig.run_settings["interval_ms"] = 3000
    rig.write_config()
    container.kill(signal="SIGHUP")
    reload = wait_for_line(container, lambda e: e.get("event") == "reload", "a reload line")
    assert reload["level"] == "info", reload
    assert str(rig.config) in reload["summary"], reload

    # docker stop: SIGTERM, the current pass ends, exit 0
    container.stop(timeout=STOP_TIMEOUT)
    container.reload()
    assert container.attrs["State"]["ExitCode"] == 0, container.logs().decode()[-3000:]
    last = [e for e in stdout_lines(container) if e.get("event") == "daemon"]
    assert last and "stop" in str(last[-1].get("summary")), last
