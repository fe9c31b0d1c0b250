"""A 3-node MariaDB Galera cluster in containers, and the network faults the tests put on it.

Each node is a container of the image tests/containers/galera builds, on a Docker network of
its own (the peers' link); its MySQL port is published on 127.0.0.1 and reached by the checker
through a Relay (the checker's link). Faults are made in a node's network namespace from the
host (`nsenter -n iptables`), so the node and its peers see real dropped packets:

- cut_from_peers(n): n's Galera traffic to and from the other nodes is dropped (a partition);
  the checker still reaches it;
- cut_from_checker(n, loss): what the checker's link brings to n is dropped, all of it or a
  random share (`-m statistic`); the peers still reach it;
- a relay's `slowed()` holds the replies to the checker back (the slow link).

Containers are started and removed through testcontainers (the docker SDK underneath).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from checker_core.core.model import NodeAddress
from tests.containers.relay import Relay
from tests.lab.paths import LOOPBACK
from tests.lab.process import LabError, wait_until

SIZE = 3
FORM_TIMEOUT = 180.0  # a fresh cluster on 2 cores: normally ~10 s
HEAL_TIMEOUT = 120.0
VIEW_TIMEOUT = 60.0  # Galera's failure detector: evs.inactive_timeout is 6 s
CHAIN = "CHECKERS_FAULTS"  # the tests' own iptables chain in a node's namespace
LABEL = "org.proxysql-checkers.tests"  # on every container and network made here


@dataclass(frozen=True)
class NodeState:
    """What one node says about itself; None fields when it did not answer."""

    state: str | None
    status: str | None
    size: int | None

    @property
    def synced_primary(self) -> bool:
        return self.state == "Synced" and self.status == "Primary"


class GaleraContainers:
    """Start, inspect, break and heal the containerized cluster."""

    def __init__(self, image: str, size: int = SIZE) -> None:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.network import Network

        self.image = image
        self.nodes = tuple(range(1, size + 1))
        self.tag = uuid.uuid4().hex[:8]
        self.network = Network(docker_network_kw={"labels": {LABEL: "galera"}})
        self.containers: dict[int, Any] = {}
        self.relays: dict[int, Relay] = {}
        self._container_class = DockerContainer

    # ---------------------------------------------------------------------------- life cycle

    def start(self) -> None:
        """A formed cluster. The cluster is the tests' fixture, not what they test: a start
        that does not form (rare, on 2 busy cores) is removed and made
        once more from scratch, and the first attempt's node logs go with a second failure."""
        remove_leftovers()
        try:
            self._start_once()
            return
        except LabError as exc:
            first = str(exc)
        self.remove()
        self.containers.clear()
        self.relays.clear()
        try:
            self._start_once()
        except LabError as exc:
            raise LabError(f"{exc}\n=== the first attempt:\n{first}") from None

    def _start_once(self) -> None:
        self.network.create()
        peers = ",".join(self.alias(n) for n in self.nodes)
        for n in self.nodes:
            command = [
                f"--wsrep-cluster-address=gcomm://{peers}",
                f"--wsrep-node-name=node{n}",
                f"--server-id={n}",
            ]
            if n == 1:
                command.append("--wsrep-new-cluster")
            container = (
                self._container_class(self.image)
                .with_name(f"checkers-galera-{self.tag}-{n}")
                .with_network(self.network)
                .with_network_aliases(self.alias(n))
                .with_command(command)
                .with_kwargs(labels={LABEL: "galera"})
            )
            # published on loopback only: the nodes are the tests' own, nobody else's business
            bindings: dict[str, Any] = container.ports
            bindings["3306/tcp"] = (LOOPBACK, None)
            container.start()
            self.containers[n] = container
            if n == 1:
                # joiners that start before the Primary component exists may form one of their
                # own; one bootstrap node first, then the others join it
                self.wait_state(1, "Primary", FORM_TIMEOUT)
            else:
                # one joiner at a time: Galera 4 orders configuration changes like write sets,
                # and a joiner catching up by IST while another joins can miss one ("IST didn't
                # contain all write sets") and abort, which a busy machine makes likely
                self.wait_joined(n, FORM_TIMEOUT)
        for n in self.nodes:
            self.relays[n] = Relay((LOOPBACK, self.published_port(n)))
        self.wait_formed(FORM_TIMEOUT)

    def remove(self) -> None:
        for relay in self.relays.values():
            relay.close()
        for container in self.containers.values():
            with contextlib.suppress(Exception):
                container.stop()
        with contextlib.suppress(Exception):
            self.network.remove()

    def alias(self, n: int) -> str:
        return f"node{n}-{self.tag}"

    def published_port(self, n: int) -> int:
        wrapped = self.containers[n].get_wrapped_container()
        wrapped.reload()
        binding = wrapped.attrs["NetworkSettings"]["Ports"]["3306/tcp"][0]
        return int(binding["HostPort"])

    def address(self, n: int) -> NodeAddress:
        """Where the checker reaches node n: its relay."""
        return NodeAddress(LOOPBACK, self.relays[n].port)

    def addresses(self) -> list[NodeAddress]:
        return [self.address(n) for n in self.nodes]

    def logs(self, n: int) -> str:
        out, err = self.containers[n].get_logs()
        return str((out + err).decode(errors="replace"))[-4000:]

    # ---------------------------------------------------------------------------- inspection

    def _attrs(self, n: int) -> dict[str, Any]:
        wrapped = self.containers[n].get_wrapped_container()
        wrapped.reload()
        attrs: dict[str, Any] = wrapped.attrs
        return attrs

    def pid(self, n: int) -> int:
        return int(self._attrs(n)["State"]["Pid"])

    def ip(self, n: int) -> str:
        return str(self._attrs(n)["NetworkSettings"]["Networks"][self.network.name]["IPAddress"])

    def gateway(self) -> str:
        """The address the checker's traffic comes from inside the network (docker-proxy)."""
        network = self.network._unwrap_network
        network.reload()
        return str(network.attrs["IPAM"]["Config"][0]["Gateway"])

    def node_state(self, n: int) -> NodeState:
        """Asked inside the container over the server's socket: past the relay and whatever
        the tests did to the node's network."""
        sql = (
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
            "WHERE VARIABLE_NAME IN "
            "('WSREP_LOCAL_STATE_COMMENT', 'WSREP_CLUSTER_STATUS', 'WSREP_CLUSTER_SIZE')"
        )
        try:
            code, out = (
                self.containers[n]
                .get_wrapped_container()
                .exec_run(["mariadb", "--batch", "--skip-column-names", "-e", sql])
            )
        except Exception:  # a container that is gone or stopping answers nothing
            return NodeState(None, None, None)
        if code != 0:
            return NodeState(None, None, None)
        values = dict(line.split("\t", 1) for line in out.decode().splitlines() if "\t" in line)
        size = values.get("WSREP_CLUSTER_SIZE")
        return NodeState(
            values.get("WSREP_LOCAL_STATE_COMMENT"),
            values.get("WSREP_CLUSTER_STATUS"),
            int(size) if size is not None else None,
        )

    def wait_formed(self, timeout: float = HEAL_TIMEOUT) -> None:
        def formed() -> bool:
            states = [self.node_state(n) for n in self.nodes]
            return all(s.synced_primary and s.size == len(self.nodes) for s in states)

        what = f"the container cluster to be {len(self.nodes)} Synced Primary nodes"
        try:
            wait_until(formed, timeout, what, 0.5)
        except LabError as exc:
            tails = "\n".join(f"--- node{n}\n{self.logs(n)}" for n in self.nodes)
            raise LabError(f"{exc}\n{tails}") from None

    def wait_joined(self, n: int, timeout: float) -> None:
        """Until node n is Synced in a Primary component of n nodes (nodes 1..n joined)."""

        def joined() -> bool:
            state = self.node_state(n)
            return state.synced_primary and state.size == n

        wait_until(joined, timeout, f"node{n} to join as the {n}th Synced node", 0.3)

    def wait_state(self, n: int, wanted: str, timeout: float = VIEW_TIMEOUT) -> NodeState:
        """Until node n reports wsrep_cluster_status `wanted` (Primary / non-Primary)."""

        def reached() -> NodeState | None:
            state = self.node_state(n)
            return state if state.status == wanted else None

        return wait_until(reached, timeout, f"node{n} to be {wanted}", 0.3)

    # ---------------------------------------------------------------------------- faults

    def _iptables(self, n: int, *args: str) -> None:
        iptables = shutil.which("iptables")
        nsenter = shutil.which("nsenter")
        if iptables is None or nsenter is None:
            raise LabError("iptables and nsenter are needed to cut links (iptables, util-linux)")
        done = subprocess.run(
            [nsenter, "-t", str(self.pid(n)), "-n", iptables, "-w", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise LabError(f"iptables {' '.join(args)} in node{n}: {done.stderr.strip()}")

    def _chain(self, n: int) -> None:
        """The tests' chain, hooked into INPUT and OUTPUT once."""
        try:
            self._iptables(n, "-N", CHAIN)
        except LabError:
            return  # made (and hooked) by an earlier fault on this node
        for hook in ("INPUT", "OUTPUT"):
            self._iptables(n, "-I", hook, "-j", CHAIN)

    def cut_from_peers(self, n: int) -> None:
        """A partition: n and the other nodes no longer hear each other."""
        self.split({n})

    def split(self, side: set[int]) -> None:
        """A partition: the nodes of `side` hear each other, and none of the rest."""
        for n in side:
            self._chain(n)
            for peer in self.nodes:
                if peer not in side:
                    ip = self.ip(peer)
                    self._iptables(n, "-A", CHAIN, "-s", ip, "-j", "DROP")
                    self._iptables(n, "-A", CHAIN, "-d", ip, "-j", "DROP")

    def cut_from_checker(self, n: int, loss: float = 1.0) -> None:
        """Drop what travels between n and the checker: all of it, or a random share."""
        self._chain(n)
        gateway = self.gateway()
        share = [] if loss >= 1.0 else ["-m", "statistic", "--mode", "random"]
        share += [] if loss >= 1.0 else ["--probability", f"{loss:.2f}"]
        self._iptables(n, "-A", CHAIN, "-s", gateway, *share, "-j", "DROP")
        self._iptables(n, "-A", CHAIN, "-d", gateway, *share, "-j", "DROP")

    def heal(self, n: int | None = None) -> None:
        """Every fault the tests made, gone (on node n, or all)."""
        for node in self.nodes if n is None else (n,):
            with contextlib.suppress(LabError):
                self._iptables(node, "-F", CHAIN)
            self.relays[node].delay = 0.0

    @contextlib.contextmanager
    def fault(self) -> Iterator[None]:
        """Heal whatever the block broke, even when it fails."""
        try:
            yield
        finally:
            self.heal()


def cluster_settled(cluster: GaleraContainers) -> None:
    """Between tests: faults gone and the cluster whole again."""
    cluster.heal()
    cluster.wait_formed(HEAL_TIMEOUT)


def remove_leftovers() -> None:
    """Containers and networks of an earlier run that was killed before it could remove them
    (only ours: they carry LABEL)."""
    import docker

    client = docker.from_env()
    try:
        for container in client.containers.list(all=True, filters={"label": LABEL}):
            container.remove(force=True, v=True)
        for network in client.networks.list(filters={"label": LABEL}):
            network.remove()
    finally:
        client.close()
