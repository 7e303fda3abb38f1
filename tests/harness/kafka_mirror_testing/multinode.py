"""A real Apache Kafka cluster of several nodes (KRaft, each node broker and controller) on
loopback, as production runs them: replication factor 3, ``min.insync.replicas`` 2, a quorum of
three controllers (static voters). Leaders move, in-sync replica sets shrink, a node can be
killed and started again while the others serve; an unclean leader election can be provoked.

Each node is a :class:`~kafka_mirror_testing.localcluster.LocalKafkaCluster` of its own process
(same jars, logging and class data archive), formatted with the cluster's shared id. The
cluster offers what the tests use of a single-node one: ``bootstrap`` (every node),
``client_config()``, ``admin()``, ``create_topic()``, ``start()``, ``stop()``, ``alive()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from kafka_mirror_testing.localcluster import (
    CONFIG_TOOL_MAIN,
    LOOPBACK,
    STORAGE_TOOL_MAIN,
    LocalClusterError,
    LocalKafkaCluster,
    free_port,
    random_cluster_id,
)
from kafka_mirror_testing.service import Service
from kafka_mirror_testing.waiting import PATIENCE

__all__ = ["KafkaNode", "MultiNodeKafkaCluster", "NodeAddress"]

ELECTION_MAIN = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN_MAIN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


@dataclass(frozen=True)
class NodeAddress:
    """Where one node's listener is: advertised as ``host``, bound to ``bind`` on ``port`` (0: a
    free one)."""

    host: str
    bind: str
    port: int = 0


def node_address(cluster: MultiNodeKafkaCluster, listener: str, node_id: int
                 ) -> NodeAddress | None:
    addresses = cluster.node_addresses.get(listener)
    return addresses[node_id - 1] if addresses else None


class KafkaNode(LocalKafkaCluster):
    """One node of a :class:`MultiNodeKafkaCluster`: its ports and the quorum come from there."""

    def __init__(self, cluster: MultiNodeKafkaCluster, node_id: int, heap: str,
                 server_overrides: Mapping[str, str]) -> None:
        own = {name: addresses[node_id - 1]
               for name, addresses in cluster.node_addresses.items()}
        super().__init__(f"{cluster.name}-{node_id}", cluster.workdir, heap=heap,
                         server_overrides={**server_overrides,
                                           **cluster.node_overrides.get(node_id, {})},
                         extra_listeners=cluster.extra_listeners,
                         advertised_hosts={name: a.host for name, a in own.items()},
                         listener_binds={
                             **{name: (host, 0) for name, host in cluster.listener_hosts.items()},
                             **{name: (a.bind, a.port) for name, a in own.items()}},
                         jvm_args=cluster.jvm_args, env=cluster.env)
        self.cluster = cluster
        self.node_id = node_id
        self.cluster_id = cluster.cluster_id

    def server_properties(self) -> dict[str, str]:
        props = super().server_properties()
        props.pop("controller.quorum.bootstrap.servers", None)
        props["controller.quorum.voters"] = self.cluster.voters
        replicas = str(min(3, len(self.cluster.nodes)))
        min_isr = str(min(2, len(self.cluster.nodes)))
        props.update({
            "default.replication.factor": replicas,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min_isr,
            # a restarted node takes its leaderships back soon (production's default is 300 s)
            "leader.imbalance.check.interval.seconds": "5",
            # a killed node is fenced, and out of the in-sync replicas, within 3 s (9 s)
            "broker.heartbeat.interval.ms": "500",
            "broker.session.timeout.ms": "3000",
        })
        props.update(self.server_overrides)
        return props

    def _pick_ports(self) -> None:
        self.ports = dict(self.cluster.ports[self.node_id])

    def _format_storage(self) -> None:
        # static voters: every node formatted with the cluster id alone
        self._run_tool(STORAGE_TOOL_MAIN,
                       ["format", "-t", self.cluster_id, "-c", str(self.config_path)],
                       "formatting storage")

    def kill_hard(self) -> None:
        """SIGKILL this node's PID (no controlled shutdown: its leaderships are lost, not
        handed over) and reap it."""
        pid = self.pid
        if pid is not None and self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.stop(timeout=30)


class MultiNodeKafkaCluster(Service):
    """``nodes`` KRaft nodes (broker + controller each) on 127.0.0.1, started together.

    ``extra_listeners`` (name -> security protocol) gives every node another listener, bound to
    127.0.0.1 unless ``listener_hosts`` names another address for it (the nodes then share that
    address, each on a port of its own) or ``node_addresses`` gives each node's own (name -> one
    :class:`NodeAddress` per node: advertised host name, bind address, port; production's
    ``kafka1.example.net:9093``, ``kafka2...``); ``bootstrap_for(name)`` lists every node's.
    ``node_overrides`` (node id -> properties) are merged over ``server_overrides`` for that node
    (e.g. its own Kerberos service principal); ``jvm_args`` and ``env`` are every node's."""

    def __init__(self, name: str, workdir: Path, nodes: int = 3, heap: str = "384m",
                 server_overrides: Mapping[str, str] | None = None,
                 extra_listeners: Mapping[str, str] | None = None,
                 listener_hosts: Mapping[str, str] | None = None, *,
                 node_addresses: Mapping[str, Sequence[NodeAddress]] | None = None,
                 node_overrides: Mapping[int, Mapping[str, str]] | None = None,
                 jvm_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        if nodes < 1:
            raise ValueError("a cluster has at least one node")
        self.extra_listeners = dict(extra_listeners or {})
        self.listener_hosts = dict(listener_hosts or {})
        self.node_addresses = {k.upper(): list(v) for k, v in (node_addresses or {}).items()}
        short = [k for k, v in self.node_addresses.items() if len(v) != nodes]
        if short:
            raise ValueError(f"node_addresses of {short} do not give one address per node")
        self.node_overrides = {k: dict(v) for k, v in (node_overrides or {}).items()}
        self.jvm_args = list(jvm_args)
        self.env = dict(env or {})
        self.name = name
        self.workdir = Path(workdir).resolve()
        self.cluster_id = random_cluster_id()
        self.ports: dict[int, dict[str, int]] = {}
        self.nodes: list[KafkaNode] = []
        self.nodes = [KafkaNode(self, i, heap, dict(server_overrides or {}))
                      for i in range(1, nodes + 1)]

    # ---------------------------------------------------------------- addresses
    @property
    def voters(self) -> str:
        return ",".join(f"{node_id}@{LOOPBACK}:{ports['CONTROLLER']}"
                        for node_id, ports in sorted(self.ports.items()))

    @property
    def bootstrap(self) -> str:
        """Every node's PLAINTEXT listener (clients find the live ones)."""
        return ",".join(f"{LOOPBACK}:{self.ports[n.node_id]['PLAINTEXT']}" for n in self.nodes)

    def bootstrap_for(self, listener: str) -> str:
        """Every node's address on ``listener``."""
        return ",".join(node.bootstrap_for(listener) for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def client_config(self, **extra: str) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap, **extra}

    def admin(self, **extra: str) -> Any:
        from confluent_kafka.admin import AdminClient

        conf: dict[str, str | int | float | bool] = {**self.client_config(**extra)}
        return AdminClient(conf)

    def create_topic(self, topic: str, partitions: int = 1,
                     config: Mapping[str, str] | None = None, timeout: float = 30.0, *,
                     replicas: Sequence[Sequence[int]] | None = None) -> None:
        """Create a topic, replicated on every node (at most 3), or on the node ids
        ``replicas`` gives per partition (the first one the preferred leader)."""
        from confluent_kafka.cimpl import NewTopic

        if replicas is not None:
            new = NewTopic(topic, num_partitions=len(replicas),
                           replica_assignment=[list(r) for r in replicas],
                           config=dict(config or {}))
        else:
            new = NewTopic(topic, num_partitions=partitions,
                           replication_factor=min(3, len(self.nodes)),
                           config=dict(config or {}))
        admin = self.admin()
        admin.create_topics([new], operation_timeout=timeout)[topic].result(timeout=timeout)

    def leaders(self, topic: str) -> dict[int, tuple[int, list[int]]]:
        """Per partition: (leader node id or -1, in-sync replica ids), as the cluster says."""
        metadata = self.admin().list_topics(topic, timeout=10)
        partitions = metadata.topics[topic].partitions
        return {p: (meta.leader, sorted(meta.isrs)) for p, meta in partitions.items()}

    def elect_leaders(self, topic: str, partitions: Sequence[int], kind: str = "preferred"
                      ) -> None:
        """Kafka's own ``kafka-leader-election`` (``preferred`` or ``unclean``) for
        ``partitions`` of ``topic``."""
        node = next(n for n in self.nodes if n.alive())
        plan = node.home / f"elect-{topic}.json"
        plan.write_text(json.dumps({"partitions": [
            {"topic": topic, "partition": p} for p in partitions]}), encoding="utf-8")
        node._run_tool(ELECTION_MAIN, ["--bootstrap-server", self.bootstrap, "--election-type",
                                       kind, "--path-to-json-file", str(plan)],
                       f"{kind} leader election of {topic} {list(partitions)}")

    def reassign(self, topic: str, replicas: Mapping[int, Sequence[int]],
                 timeout: float = 60.0) -> None:
        """Kafka's own ``kafka-reassign-partitions``: partition -> replica node ids (the first
        the preferred leader); returns once the cluster reports them."""
        node = next(n for n in self.nodes if n.alive())
        plan = node.home / f"reassign-{topic}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": p, "replicas": list(r)}
            for p, r in sorted(replicas.items())]}), encoding="utf-8")
        node._run_tool(REASSIGN_MAIN, ["--bootstrap-server", self.bootstrap,
                                       "--reassignment-json-file", str(plan), "--execute"],
                       f"reassignment of {topic}")
        deadline = time.monotonic() + timeout
        while self.replicas(topic) != {p: list(r) for p, r in replicas.items()}:
            if time.monotonic() > deadline:
                raise LocalClusterError(f"reassignment of {topic} not done in {timeout:.0f} s: "
                                        f"{self.replicas(topic)}")
            time.sleep(0.5)

    def set_producer_quota(self, client_id: str, bytes_per_second: int | None) -> None:
        """Throttle producers with ``client_id`` on every node (Kafka's ``kafka-configs``);
        ``None`` removes the quota."""
        node = next(n for n in self.nodes if n.alive())
        change = (["--delete-config", "producer_byte_rate"] if bytes_per_second is None
                  else ["--add-config", f"producer_byte_rate={bytes_per_second}"])
        node._run_tool(CONFIG_TOOL_MAIN, ["--bootstrap-server", self.bootstrap, "--alter",
                                          "--entity-type", "clients", "--entity-name",
                                          client_id, *change],
                       f"producer quota {bytes_per_second} for {client_id!r}")

    def replicas(self, topic: str) -> dict[int, list[int]]:
        """Per partition, its replica node ids in order (the first the preferred leader)."""
        metadata = self.admin().list_topics(topic, timeout=10)
        return {p: list(meta.replicas) for p, meta in metadata.topics[topic].partitions.items()}

    # ---------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 90.0) -> Self:
        """Start every node that is not running and wait until each answers. The first start
        picks ports and formats the storage; later ones keep both (a restart)."""
        first = not self.ports
        if first:
            for node in self.nodes:
                self.ports[node.node_id] = {
                    name: (fixed.port if (fixed := node_address(self, name, node.node_id))
                           and fixed.port else free_port())
                    for name in ("PLAINTEXT", *(n.upper() for n in self.extra_listeners),
                                 "CONTROLLER")}
                node.ports = dict(self.ports[node.node_id])
        down = [n for n in self.nodes if not n.alive()]
        deadline = time.monotonic() + timeout * PATIENCE
        fresh = down if first else []
        with ThreadPoolExecutor(max_workers=max(1, len(fresh))) as pool:
            for future in [pool.submit(n._prepare) for n in fresh]:
                future.result()
        for node in down:
            node._launch()
        try:
            for node in down:
                node._wait_ready(deadline)
                node.register()
        except LocalClusterError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def alive(self) -> bool:
        return all(node.alive() for node in self.nodes)

    def __repr__(self) -> str:
        up = [n.node_id for n in self.nodes if n.alive()]
        return f"MultiNodeKafkaCluster({self.name!r}, nodes up {up})"
