"""The ProxySQL Cluster example (config/kubernetes/proxysql-cluster.yaml): three proxies that list
each other as every pod's checker names its own proxy, cluster credentials the peers can use, and
a checker configuration that loads with the pod's environment."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml

from checker_core.core.leadership import ProxyAddress
from checker_core.core.schema import Checker
from checker_core.settings.config import load

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "config" / "kubernetes" / "proxysql-cluster.yaml"


def manifests() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d
        for d in manifests()
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def stateful_set() -> dict[str, Any]:
    return one("StatefulSet")


def container(prefix: str) -> dict[str, Any]:
    containers = stateful_set()["spec"]["template"]["spec"]["containers"]
    found: list[dict[str, Any]] = [c for c in containers if c["image"].startswith(prefix)]
    assert len(found) == 1, f"expected one {prefix} container"
    return found[0]


def proxysql_cnf() -> str:
    text: str = one("Secret", "proxysql-secrets")["stringData"]["proxysql.cnf"]
    return text


def checker_config() -> dict[str, Any]:
    text = one("ConfigMap", "proxysql-checker")["data"]["checker.toml"]
    return tomllib.loads(text)


def cnf_value(key: str) -> str:
    found = re.search(rf'^\s*{re.escape(key)}\s*=\s*"?([^"\n]*)"?', proxysql_cnf(), re.M)
    assert found, f"proxysql.cnf has no {key}"
    return found.group(1).strip()


def listed_peers() -> list[ProxyAddress]:
    block = re.search(r"^\s*proxysql_servers\s*=\s*\((.*?)^\s*\)", proxysql_cnf(), re.M | re.S)
    assert block, "proxysql.cnf has no proxysql_servers"
    return [
        ProxyAddress(host, int(port))
        for host, port in re.findall(r'hostname="([^"]+)",\s*port=(\d+)', block.group(1))
    ]


def pod_addresses() -> list[ProxyAddress]:
    """What CHECKER_PROXYSQL_CLUSTER_ADDRESS becomes in each pod of the StatefulSet."""
    env = container("proxysql-checkers:").get("env", [])
    names = [e["name"] for e in env]
    assert "CHECKER_PROXYSQL_CLUSTER_ADDRESS" in names, "the checker does not name its proxy"
    pod_name = next(e for e in env if e["name"] == "POD_NAME")
    assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert names.index("POD_NAME") < names.index("CHECKER_PROXYSQL_CLUSTER_ADDRESS"), (
        "Kubernetes expands $(POD_NAME) only from variables defined before"
    )
    template = next(e for e in env if e["name"] == "CHECKER_PROXYSQL_CLUSTER_ADDRESS")["value"]
    spec = stateful_set()
    addresses = []
    for ordinal in range(spec["spec"]["replicas"]):
        text = template.replace("$(POD_NAME)", f"{spec['metadata']['name']}-{ordinal}")
        host, _, port = text.rpartition(":")
        addresses.append(ProxyAddress(host, int(port)))
    return addresses


def test_three_proxies_list_each_other_as_each_checker_names_its_own() -> None:
    spec = stateful_set()["spec"]
    assert spec["replicas"] == 3
    service = one("Service", spec["serviceName"])
    assert service["spec"]["clusterIP"] == "None", "peer names need a headless Service"
    assert service["spec"].get("publishNotReadyAddresses") is True
    peers = listed_peers()
    assert sorted(pod_addresses()) == sorted(peers), "a checker would name a proxy not listed"
    assert all(p.host.endswith(f".{spec['serviceName']}") for p in peers)


def test_the_peers_can_log_in_to_each_others_admin_interface() -> None:
    interface = cnf_value("mysql_ifaces").split(";")[0]
    host, _, port = interface.rpartition(":")
    assert host not in {"127.0.0.1", "localhost", "::1"}, "the peers cannot reach loopback"
    assert {int(port)} == {p.port for p in listed_peers()}
    user, password = cnf_value("cluster_username"), cnf_value("cluster_password")
    assert f"{user}:{password}" in cnf_value("admin_credentials").split(";")
    assert user != "admin", "ProxySQL lets its 'admin' user log in from localhost only"
    admin_port = {p["containerPort"] for p in container("proxysql/proxysql:")["ports"]}
    assert int(port) in admin_port


def test_the_checker_config_loads_with_the_pods_environment(tmp_path: Path) -> None:
    config = checker_config()
    assert config["proxysql"].get("cluster", "auto") == "auto"
    text = one("ConfigMap", "proxysql-checker")["data"]["checker.toml"]
    for section in ("proxysql", "monitor"):
        path = config[section]["password_file"]
        local = tmp_path / Path(path).name
        local.write_text("secret\n")
        local.chmod(0o400)
        text = text.replace(f'"{path}"', f'"{local}"')
    copy = tmp_path / "checker.toml"
    copy.write_text(text)
    copy.chmod(0o600)
    for address in pod_addresses():
        env = {"CHECKER_PROXYSQL_CLUSTER_ADDRESS": str(address)}
        settings = load(copy, Checker.GALERA, env=env)
        assert settings.proxysql.me == address
    program = shutil.which("galera-checker")
    assert program is not None, "the checker is not installed (pip install -e .)"
    done = subprocess.run(
        [program, "--config", str(copy), "check-config"],
        env={
            "PATH": os.environ.get("PATH", os.defpath),
            "CHECKER_PROXYSQL_CLUSTER_ADDRESS": str(pod_addresses()[0]),
            "CHECKER_RUN_STATE_DIR": str(tmp_path / "state"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ProxySQL Cluster: " in done.stdout
