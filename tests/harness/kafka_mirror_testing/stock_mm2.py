"""Run stock Apache Kafka MirrorMaker 2 (dedicated mode) -- the yardstick for benchmarks.

``java -Xmx<heap> -cp <kafka_classpath> org.apache.kafka.connect.mirror.MirrorMaker mm2.properties``
with its log4j2 output in ``<workdir>/mm2.log``. ``.pid`` is the JVM's PID, so benchmarks can read
``/proc/<pid>/stat`` (CPU) and ``/proc/<pid>/status`` (VmHWM).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from kafka_mirror.jvm_artifacts import java_executable, kafka_classpath
from kafka_mirror_testing.localcluster import (
    DEFAULT_JVM_FLAGS,
    LOG4J2_PROPERTIES,
    JvmProcess,
    LocalClusterError,
    min_heap,
    tail,
    write_properties,
)
from kafka_mirror_testing.quick_jvms import class_data_flags, extra_jvm_flags
from kafka_mirror_testing.service import Service

__all__ = ["MM2_MAIN", "StockMirrorMaker2", "mm2_properties", "read_properties"]

MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"

# Logged by org.apache.kafka.connect.mirror.MirrorMaker once all herders are started.
STARTED_MARKER = "Kafka MirrorMaker started"


# An MM2 that only copies records and stores its source positions every second: one herder
# (no heartbeats), no checkpoints, no group offset sync; other tests' heartbeats topics on
# shared clusters are not replicated. For ``mm2_properties(extra=...)``.
RECORDS_ONLY: Mapping[str, str] = {
    "offset.flush.interval.ms": "1000",
    "emit.heartbeats.enabled": "false",
    "heartbeats.replication.enabled": "false",
    "emit.checkpoints.enabled": "false",
    "sync.group.offsets.enabled": "false",
}


def mm2_properties(
    source_bootstrap: str,
    target_bootstrap: str,
    topics: str = ".*",
    *,
    source_alias: str = "source",
    target_alias: str = "destination",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A one-way ``source -> destination`` MM2 config suited to single-broker test clusters."""
    flow = f"{source_alias}->{target_alias}"
    props: dict[str, str] = {
        "clusters": f"{source_alias}, {target_alias}",
        f"{source_alias}.bootstrap.servers": source_bootstrap,
        f"{target_alias}.bootstrap.servers": target_bootstrap,
        f"{flow}.enabled": "true",
        f"{flow}.topics": topics,
        f"{target_alias}->{source_alias}.enabled": "false",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "refresh.topics.interval.seconds": "5",
        "refresh.groups.interval.seconds": "5",
        "sync.topic.acls.enabled": "false",
        # All plugins MM2 needs ship ServiceLoader manifests: skip the slow class path scan
        # (done once per herder otherwise, ~5 s each on 2 cores).
        # (MM2 builds each herder's worker config from the target cluster's properties.)
        "plugin.discovery": "service_load",
        f"{source_alias}.plugin.discovery": "service_load",
        f"{target_alias}.plugin.discovery": "service_load",
    }
    props.update(extra or {})
    return props


def read_properties(path: Path) -> dict[str, str]:
    """Minimal ``.properties`` reader (``key=value`` / ``key: value``, ``#``/``!`` comments)."""
    props: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            props[line] = ""
    return props


class StockMirrorMaker2(Service):
    """Stock MirrorMaker 2 in dedicated mode, started and stopped by PID.

    ``properties`` is either a mapping (written as ``<workdir>/mm2.properties``) or the path of an
    existing properties file (copied there verbatim).
    """

    def __init__(
        self,
        properties: Mapping[str, str] | Path,
        workdir: Path,
        heap: str = "1g",
        *,
        jvm_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_level: str = "INFO",
        clusters: Sequence[str] | None = None,
    ) -> None:
        self.properties = properties
        self.workdir = Path(workdir).resolve()
        self.heap = heap
        self.jvm_args = list(jvm_args)
        self.env = dict(env or {})
        self.log_level = log_level
        self.clusters = list(clusters or [])
        self.config_path = self.workdir / "mm2.properties"
        self.log4j_path = self.workdir / "mm2-log4j2.properties"
        self.log_path = self.workdir / "mm2.log"
        self._process: JvmProcess | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.alive()

    def argv(self) -> list[str]:
        args = [str(self.config_path)]
        if self.clusters:
            args += ["--clusters", *self.clusters]
        return [
            java_executable(),
            f"-Xmx{self.heap}",
            f"-Xms{min_heap(self.heap)}",
            *DEFAULT_JVM_FLAGS,
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            f"-Dkafka.logs.dir={self.workdir}",
            *self.jvm_args,
            *extra_jvm_flags(),
            *class_data_flags(),
            "-cp",
            kafka_classpath(),
            MM2_MAIN,
            *args,
        ]

    def _write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if isinstance(self.properties, Path):
            text = self.properties.read_text(encoding="utf-8")
            self.config_path.write_text(text, encoding="utf-8")
        else:
            write_properties(self.config_path, self.properties)
        self.log4j_path.write_text(
            LOG4J2_PROPERTIES.format(root_level=self.log_level), encoding="utf-8"
        )

    def start(self, wait_started: float | None = 60.0) -> Self:
        """Launch the JVM. With ``wait_started`` (seconds), wait for MM2's "started" log line."""
        if self.alive():
            return self
        self._write_config()
        self._process = JvmProcess(
            "mirror-maker-2", self.argv(), self.log_path, self.workdir, env=self.env
        )
        offset = self._process.log_size()
        self._process.start()
        if wait_started is not None and not self._process.wait_for_log(
            STARTED_MARKER, wait_started, since=offset
        ):
            state = (
                "not started in time"
                if self._process.alive()
                else f"exited (code {self._process.returncode()})"
            )
            self.stop()
            raise LocalClusterError(
                f"MirrorMaker 2 {state}; last lines of {self.log_path}:\n{tail(self.log_path)}"
            )
        return self

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM the PID, wait up to ``timeout`` s, then SIGKILL that PID. Returns exit code."""
        if self._process is None:
            return None
        return self._process.stop(timeout)

    def wait_for_log(self, text: str, timeout: float) -> bool:
        """Wait until ``text`` shows up in ``mm2.log``."""
        if self._process is None:
            return False
        return self._process.wait_for_log(text, timeout)
