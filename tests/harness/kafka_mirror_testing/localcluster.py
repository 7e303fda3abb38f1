"""A real single-node Apache Kafka cluster (KRaft, combined broker + controller) for tests.

The broker runs from the jars built under ``jvm/kafka-dist`` (see :mod:`kafka_mirror.jvm_artifacts`)
as ``java -cp <kafka_classpath> kafka.Kafka server.properties``, after its storage was formatted
with ``kafka.tools.StorageTool format --standalone``. It listens on free loopback ports only.

Command line (used by the demo)::

    python -m kafka_mirror_testing.localcluster --workdir DIR

starts clusters ``source`` and ``destination``, prints their bootstrap servers and stays up until
SIGTERM / SIGINT.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any, Self

from kafka_mirror.jvm_artifacts import java_executable, kafka_classpath
from kafka_mirror_testing.quick_jvms import class_data_flags, extra_jvm_flags
from kafka_mirror_testing.service import Service
from kafka_mirror_testing.waiting import PATIENCE

__all__ = [
    "JvmProcess",
    "LocalClusterError",
    "LocalKafkaCluster",
    "free_port",
    "local_clusters",
    "main",
    "random_cluster_id",
    "stop_process",
    "tail",
    "write_properties",
]

KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
CONFIG_TOOL_MAIN = "kafka.admin.ConfigCommand"
LOOPBACK = "127.0.0.1"
LOG_TAIL_LINES = 40

# Kafka's own kafka-run-class.sh defaults, minus the GC log.
DEFAULT_JVM_FLAGS: tuple[str, ...] = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

# Console (stdout) log4j2 configuration; stdout/stderr of the JVM go to the log file, so JVM
# errors printed outside log4j (bad flags, OOM) land in the same file.
LOG4J2_PROPERTIES = """\
status = warn
name = kafka-mirror-local
appender.console.type = Console
appender.console.name = STDOUT
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {root_level}
rootLogger.appenderRef.stdout.ref = STDOUT
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
logger.clientsconfig.name = org.apache.kafka.common.config.AbstractConfig
logger.clientsconfig.level = WARN
"""


class LocalClusterError(RuntimeError):
    """A local JVM process (broker, storage tool, MirrorMaker 2) failed."""


# Listening ports are taken below the kernel's ephemeral range: a port the kernel handed out
# (bind to port 0) may be the source port of some client's connection by the time the broker
# binds it ("Address already in use": a 3-node cluster failed to start that way on a busy box).
# Ports 29000-30999 are left out: the Ansible checks' clusters (kafka-test-cluster.sh of
# molecule/_shared) listen on fixed ones there while the modules step's secured cluster, started
# beside them, takes ports of its own here.
LISTEN_PORTS: tuple[int, ...] = (*range(10_000, 29_000), *range(31_000, 32_768))
_random_ports = random.Random()


def _ephemeral_ports() -> range:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32_768, 61_000)


def free_port(host: str = LOOPBACK) -> int:
    """A currently free TCP port on ``host`` for a server to listen on: a random one of
    :data:`LISTEN_PORTS` outside the kernel's ephemeral range, which a connection's source port
    never takes (the kernel's own pick, port 0, when none is free)."""
    ephemeral = _ephemeral_ports()
    for _ in range(200):
        port = _random_ports.choice(LISTEN_PORTS)
        if port in ephemeral:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def random_cluster_id() -> str:
    """A random Kafka cluster id (URL-safe base64 of a UUID, as ``kafka-storage random-uuid``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """Write a Java ``.properties`` file (keys in the given order)."""

    def esc(text: str, is_key: bool) -> str:
        out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        if is_key:
            out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
        elif out.startswith(" "):
            out = "\\" + out
        return out

    lines = [f"{esc(k, True)}={esc(v, False)}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' if it does not exist)."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            return "".join(deque(fh, maxlen=lines))
    except FileNotFoundError:
        return ""


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """SIGTERM a process we started, wait up to ``timeout`` s, then SIGKILL that PID."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=30)
    return proc.returncode


class JvmProcess:
    """One JVM child process, logging (stdout + stderr) to a file, stopped by its PID only."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        cwd: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.cwd = cwd
        self.env = dict(env) if env else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def start(self) -> None:
        if self.alive():
            raise LocalClusterError(f"{self.name} is already running (pid {self.pid})")
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"### {time.strftime('%F %T')} starting: {self.argv!r}\n".encode())
        self._log.flush()
        self._proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Own session: a Ctrl-C in the terminal reaches us, and we stop the child ourselves.
            start_new_session=True,
        )

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM the PID, wait up to ``timeout`` s, then SIGKILL that PID. Returns exit code."""
        proc = self._proc
        code: int | None = None
        if proc is not None:
            code = stop_process(proc, timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def wait_for_log(self, text: str, timeout: float, since: int = 0) -> bool:
        """Wait until ``text`` appears in the log after byte offset ``since``; False on timeout
        or if the process exits first."""
        deadline = time.monotonic() + timeout
        while True:
            if self.log_contains(text, since):
                return True
            if not self.alive() or time.monotonic() >= deadline:
                return self.log_contains(text, since)
            time.sleep(0.2)

    def log_contains(self, text: str, since: int = 0) -> bool:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(since)
                return text.encode() in fh.read()
        except FileNotFoundError:
            return False

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0


class LocalKafkaCluster(Service):
    """A single-node KRaft Kafka cluster on 127.0.0.1, for tests, demos and benchmarks.

    ``server_overrides`` are merged last into ``server.properties``. To add e.g. a SASL listener,
    name it in ``extra_listeners`` (listener name -> security protocol); a free port is picked for
    it, and ``bootstrap_for(name)`` gives its address. Every listener binds 127.0.0.1, unless
    ``listener_binds`` gives an extra listener another address and/or a fixed port (name ->
    ``(host, port)``, port 0 = a free one), e.g. to be reachable from test hosts on a bridge. One
    named in ``advertised_hosts`` is advertised (and bootstrapped) under that host name instead,
    e.g. ``localhost`` for Kerberos, whose service principal carries the host name. JAAS or other
    JVM settings go in ``jvm_args`` and ``env``. The PLAINTEXT listener always exists, binds
    127.0.0.1 and is the inter-broker one.
    """

    def __init__(
        self,
        name: str,
        workdir: Path,
        heap: str = "512m",
        server_overrides: Mapping[str, str] | None = None,
        *,
        extra_listeners: Mapping[str, str] | None = None,
        advertised_hosts: Mapping[str, str] | None = None,
        listener_binds: Mapping[str, tuple[str, int]] | None = None,
        jvm_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_level: str = "INFO",
    ) -> None:
        if not name or any(c in name for c in "/\\ "):
            raise ValueError(f"bad cluster name {name!r}")
        self.name = name
        self.workdir = Path(workdir).resolve()
        self.heap = heap
        self.server_overrides: dict[str, str] = dict(server_overrides or {})
        self.extra_listeners: dict[str, str] = {
            k.upper(): v.upper() for k, v in (extra_listeners or {}).items()
        }
        if "PLAINTEXT" in self.extra_listeners or "CONTROLLER" in self.extra_listeners:
            raise ValueError("PLAINTEXT and CONTROLLER listeners are built in")
        self.advertised_hosts: dict[str, str] = {
            k.upper(): v for k, v in (advertised_hosts or {}).items()
        }
        unknown = set(self.advertised_hosts) - set(self.extra_listeners)
        if unknown:
            raise ValueError(f"advertised_hosts names unknown listeners: {sorted(unknown)}")
        self.listener_binds: dict[str, tuple[str, int]] = {
            k.upper(): (host, int(port)) for k, (host, port) in (listener_binds or {}).items()
        }
        unknown = set(self.listener_binds) - set(self.extra_listeners)
        if unknown:
            raise ValueError(f"listener_binds names unknown listeners: {sorted(unknown)}")
        self.jvm_args = list(jvm_args)
        self.env = dict(env or {})
        self.log_level = log_level
        self._quotas: set[str] = set()  # client ids with a producer quota
        self.cluster_id = random_cluster_id()
        self.node_id = 1
        self.home = self.workdir / name
        self.data_dir = self.home / "data"
        self.config_path = self.home / "server.properties"
        self.log4j_path = self.home / "log4j2.properties"
        self.log_path = self.workdir / f"{name}.log"
        self.ports: dict[str, int] = {}
        self._process: JvmProcess | None = None

    # ---------------------------------------------------------------- addresses
    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>`` of the PLAINTEXT listener."""
        return self.bootstrap_for("PLAINTEXT")

    def bootstrap_for(self, listener: str) -> str:
        port = self.ports.get(listener.upper())
        if port is None:
            raise LocalClusterError(f"cluster {self.name!r} has no started {listener} listener")
        name = listener.upper()
        return f"{self.advertised_hosts.get(name, self._bind_host(name))}:{port}"

    def _bind_host(self, listener: str) -> str:
        return self.listener_binds.get(listener, (LOOPBACK, 0))[0]

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def client_config(self, **extra: str) -> dict[str, str]:
        """A confluent-kafka / librdkafka config dict for this cluster's PLAINTEXT listener."""
        return {"bootstrap.servers": self.bootstrap, **extra}

    def admin(self, **extra: str) -> Any:
        """A confluent-kafka ``AdminClient`` for this cluster."""
        from confluent_kafka.admin import AdminClient

        conf: dict[str, str | int | float | bool] = {**self.client_config(**extra)}
        return AdminClient(conf)

    def create_topic(
        self,
        topic: str,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic (replication factor 1) and wait until it is created."""
        from confluent_kafka.cimpl import NewTopic

        new = NewTopic(
            topic, num_partitions=partitions, replication_factor=1, config=dict(config or {})
        )
        admin = self.admin()  # must outlive the future, or the request is aborted
        futures = admin.create_topics([new], operation_timeout=timeout)
        futures[topic].result(timeout=timeout)

    # ---------------------------------------------------------------- config
    def server_properties(self) -> dict[str, str]:
        listeners = {"PLAINTEXT": "PLAINTEXT", **self.extra_listeners, "CONTROLLER": "PLAINTEXT"}
        advertised = {k: v for k, v in listeners.items() if k != "CONTROLLER"}
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": f"{LOOPBACK}:{self.ports['CONTROLLER']}",
            "listeners": ",".join(
                f"{k}://{self._bind_host(k)}:{self.ports[k]}" for k in listeners
            ),
            "advertised.listeners": ",".join(
                f"{k}://{self.advertised_hosts.get(k, self._bind_host(k))}:{self.ports[k]}"
                for k in advertised
            ),
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in listeners.items()),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "num.network.threads": "2",
            "num.io.threads": "4",
            # Mirrored records keep their (often old) source timestamps: with time-based
            # retention the broker would delete them about 30 s after startup.
            "log.retention.ms": "-1",
            "log.segment.bytes": str(64 * 1024 * 1024),
            "log.retention.check.interval.ms": "300000",
            # No no-op record in the metadata log every 500 ms (KIP-835: they only feed the
            # metadata lag metrics): an idle test broker took 1.75 CPU-s a minute, 1.03 without.
            "metadata.max.idle.interval.ms": "0",
        }
        props.update(self.server_overrides)
        return props

    def _pick_ports(self) -> None:
        names = ["PLAINTEXT", *self.extra_listeners, "CONTROLLER"]
        fixed = {k: port for k, (_, port) in self.listener_binds.items() if port}
        free = [k for k in names if k not in fixed]
        ports: set[int] = set()
        while len(ports) < len(free):
            port = free_port()
            if port not in fixed.values():
                ports.add(port)
        self.ports = {**dict(zip(free, sorted(ports), strict=True)), **fixed}

    def _java_argv(self, main_class: str, args: Sequence[str], heap: str) -> list[str]:
        return [
            java_executable(),
            f"-Xmx{heap}",
            f"-Xms{min_heap(heap)}",
            *DEFAULT_JVM_FLAGS,
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            f"-Dkafka.logs.dir={self.home / 'logs'}",
            *self.jvm_args,
            *extra_jvm_flags(),
            *class_data_flags(),
            "-cp",
            kafka_classpath(),
            main_class,
            *args,
        ]

    def _format_storage(self) -> None:
        self._run_tool(
            STORAGE_TOOL_MAIN,
            ["format", "--standalone", "-t", self.cluster_id, "-c", str(self.config_path)],
            "formatting storage",
        )

    def _run_tool(self, main_class: str, args: Sequence[str], what: str) -> None:
        """Run one of Kafka's command line tools (its own JVM), its output into the log."""
        argv = self._java_argv(main_class, args, heap="256m")
        env = {**os.environ, **self.env}
        with self.log_path.open("ab") as log:
            log.write(f"### {time.strftime('%F %T')} {what}: {argv!r}\n".encode())
            log.flush()
            result = subprocess.run(
                argv,
                cwd=self.home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=120,
                check=False,
            )
        if result.returncode != 0:
            raise LocalClusterError(
                f"{what} of cluster {self.name!r} failed (exit {result.returncode});"
                f" last lines of {self.log_path}:\n{tail(self.log_path)}"
            )

    def set_producer_quota(self, client_id: str, bytes_per_second: int | None) -> None:
        """Throttle producers with ``client_id`` to ``bytes_per_second`` (a client quota, by
        Kafka's ``kafka-configs``); ``None`` removes the quota, if one was set."""
        if bytes_per_second is None and client_id not in self._quotas:
            return
        change = (
            ["--delete-config", "producer_byte_rate"]
            if bytes_per_second is None
            else ["--add-config", f"producer_byte_rate={bytes_per_second}"]
        )
        self._run_tool(
            CONFIG_TOOL_MAIN,
            ["--bootstrap-server", self.bootstrap, "--alter", "--entity-type", "clients",
             "--entity-name", client_id, *change],
            f"producer quota {bytes_per_second} for {client_id!r}",
        )
        if bytes_per_second is None:
            self._quotas.discard(client_id)
        else:
            self._quotas.add(client_id)

    # ---------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 60.0, *, fresh: bool = False) -> Self:
        """Start the broker and wait until the Admin API answers.

        The first start (or ``fresh=True``) picks new ports and formats empty storage. A later
        start after :meth:`stop` is a restart: same ports, same data.
        """
        if self.alive():
            return self
        deadline = time.monotonic() + timeout * PATIENCE
        restart = not fresh and bool(self.ports) and (
            self._metadata_dir() / "meta.properties").is_file()
        attempts = 1 if restart else 3
        for attempt in range(1, attempts + 1):
            if not restart:
                self._prepare()
            offset = self._launch()
            try:
                self._wait_ready(deadline)
                _register_running(self)
                return self
            except LocalClusterError:
                process = self._process
                port_clash = process is not None and process.log_contains(
                    "Address already in use", offset
                )
                self.stop()
                if not port_clash or attempt == attempts or time.monotonic() >= deadline:
                    raise
        raise AssertionError("unreachable")

    def _metadata_dir(self) -> Path:
        """Where the broker keeps its metadata log (and ``meta.properties``)."""
        props = self.server_properties()
        return Path(props.get("metadata.log.dir") or props["log.dirs"].split(",")[0].strip())

    def _prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        # Fresh storage: never reuse a log dir formatted with another cluster id. A log dir set
        # in server_overrides may be a mount point (e.g. a small file system): emptied, kept.
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        overridden = [self.server_overrides.get("metadata.log.dir", ""),
                      *self.server_overrides.get("log.dirs", "").split(",")]
        for log_dir in overridden:
            if log_dir.strip() and Path(log_dir.strip()).is_dir():
                for entry in Path(log_dir.strip()).iterdir():
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
        self._pick_ports()
        self.log4j_path.write_text(
            LOG4J2_PROPERTIES.format(root_level=self.log_level), encoding="utf-8"
        )
        write_properties(self.config_path, self.server_properties())
        self._format_storage()

    def _launch(self) -> int:
        argv = self._java_argv(KAFKA_MAIN, [str(self.config_path)], heap=self.heap)
        self._process = JvmProcess(
            f"kafka[{self.name}]", argv, self.log_path, cwd=self.home, env=self.env
        )
        offset = self._process.log_size()
        self._process.start()
        return offset

    def _wait_ready(self, deadline: float) -> None:
        process = self._process
        assert process is not None
        port = self.ports["PLAINTEXT"]
        # First a plain TCP connect (quiet), then a real metadata request.
        while not _tcp_open(LOOPBACK, port):
            self._check_alive_and_time(deadline)
            time.sleep(0.1)
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": "3"})
        while True:
            self._check_alive_and_time(deadline)
            try:
                admin.list_topics(timeout=max(0.5, min(5.0, deadline - time.monotonic())))
                return
            except Exception:  # KafkaException while the broker finishes starting
                time.sleep(0.2)

    def _check_alive_and_time(self, deadline: float) -> None:
        process = self._process
        assert process is not None
        if not process.alive():
            raise LocalClusterError(
                f"Kafka cluster {self.name!r} exited during startup (exit "
                f"{process.returncode()}); last lines of {self.log_path}:\n{tail(self.log_path)}"
            )
        if time.monotonic() >= deadline:
            raise LocalClusterError(
                f"Kafka cluster {self.name!r} not ready in time; last lines of "
                f"{self.log_path}:\n{tail(self.log_path)}"
            )

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the broker's PID, wait up to ``timeout`` s, then SIGKILL that PID."""
        process = self._process
        if process is not None:
            process.stop(timeout)
        _unregister_running(self)

    def alive(self) -> bool:
        return self._process is not None and self._process.alive()

    def register(self) -> None:
        """Stopped at interpreter exit if still running (:meth:`start` does it; a cluster of
        several nodes starts them its own way)."""
        _register_running(self)

    def __repr__(self) -> str:
        state = f"pid={self.pid}, bootstrap={self.bootstrap}" if self.alive() else "stopped"
        return f"LocalKafkaCluster({self.name!r}, {state})"


def min_heap(heap: str) -> str:
    """``-Xms`` for a given ``-Xmx``: 128m, or the max heap when smaller."""
    return heap if _heap_bytes(heap) < _heap_bytes("128m") else "128m"


def _heap_bytes(heap: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = heap.strip().lower()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def _tcp_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


# Clusters still running at interpreter exit are stopped (by PID), e.g. after a crashed test run.
_RUNNING: dict[int, LocalKafkaCluster] = {}
_RUNNING_LOCK = threading.Lock()


def _register_running(cluster: LocalKafkaCluster) -> None:
    with _RUNNING_LOCK:
        _RUNNING[id(cluster)] = cluster


def _unregister_running(cluster: LocalKafkaCluster) -> None:
    with _RUNNING_LOCK:
        _RUNNING.pop(id(cluster), None)


@atexit.register
def _stop_all_at_exit() -> None:
    with _RUNNING_LOCK:
        clusters = list(_RUNNING.values())
    for cluster in clusters:
        with contextlib.suppress(Exception):
            cluster.stop(timeout=10.0)


# -------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_mirror_testing.localcluster",
        description="Start local 'source' and 'destination' Kafka clusters until SIGTERM/SIGINT.",
    )
    parser.add_argument("--workdir", type=Path, required=True, help="directory for data and logs")
    parser.add_argument("--heap", default="512m", help="broker max heap (default 512m)")
    parser.add_argument(
        "--names", default="source,destination", help="comma-separated cluster names"
    )
    parser.add_argument("--timeout", type=float, default=90.0, help="startup timeout, seconds")
    args = parser.parse_args(argv)

    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    names = [n.strip() for n in str(args.names).split(",") if n.strip()]
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    clusters: list[LocalKafkaCluster] = []
    try:
        for name in names:
            cluster = LocalKafkaCluster(name, workdir, heap=args.heap)
            clusters.append(cluster)
            cluster.start(timeout=args.timeout)
            print(f"{name}={cluster.bootstrap}", flush=True)
            if stop.is_set():
                return 0
        print("ready", flush=True)
        while not stop.wait(1.0):
            for cluster in clusters:
                if not cluster.alive():
                    print(f"cluster {cluster.name} died; see {cluster.log_path}", file=sys.stderr)
                    return 1
        return 0
    except LocalClusterError as err:
        print(str(err), file=sys.stderr)
        return 1
    finally:
        for cluster in reversed(clusters):
            cluster.stop()


@contextlib.contextmanager
def local_clusters(
    workdir: Path, *names: str, heap: str = "512m"
) -> Iterator[list[LocalKafkaCluster]]:
    """Start several clusters (stopped again on exit)."""
    clusters: list[LocalKafkaCluster] = []
    try:
        for name in names:
            clusters.append(LocalKafkaCluster(name, workdir, heap=heap).start())
        yield clusters
    finally:
        for cluster in reversed(clusters):
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
