"""Run the Java MirrorMaker 2 client probe (``jvm/mirror-client-probe``) from tests.

The probe reads MirrorMaker 2's internal records and topic names with Kafka's own
``connect-mirror-client`` library (``MirrorClient``, ``RemoteClusterUtils``, ``Checkpoint``,
``Heartbeat``) and ``connect-mirror``'s ``OffsetSync``, and prints one line of JSON. It is built by
``mvn -q -f jvm/pom.xml package``. Commands (``timeoutMs`` defaults to 30000) and answers::

    translate <remoteClusterAlias> <groupId> [timeoutMs]
        {"offsets": [{"topic", "partition", "offset", "metadata"}, ...]}
    remote-offsets <remoteClusterAlias> <groupId> [timeoutMs]
        {"offsets": [...]}  (same shape)
    hops <sourceClusterAlias>                  {"hops": N}
    upstream                                   {"upstream": [alias, ...]}
    heartbeat-topics | checkpoint-topics       {"topics": [name, ...]}
    remote-topics [sourceClusterAlias]         {"topics": [name, ...]}
    decode-checkpoints <topic> [timeoutMs]
        {"checkpoints": [{"group", "topic", "partition", "upstreamOffset", "offset", "metadata"}]}
    decode-heartbeats <topic> [timeoutMs]      {"heartbeats": [{"source", "target", "timestamp"}]}
    decode-offset-syncs <topic> [timeoutMs]
        {"syncs": [{"topic", "partition", "upstreamOffset", "offset"}]}

Offsets are sorted by (topic, partition), name lists are sorted, decoded records (partition 0,
beginning to end offset) are in log order. ``translate``/``remote-offsets`` fail at once when the
alias's checkpoints topic does not exist (Kafka's own code would block for 60 s, then time out).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_mirror.jvm_artifacts import JvmArtifactsMissing, java_executable, jvm_home
from kafka_mirror_testing.localcluster import write_properties

__all__ = ["MAIN_CLASS", "PROBE_HEAP", "PROBE_TARGET", "probe", "probe_classpath"]

PROBE_TARGET = jvm_home() / "mirror-client-probe" / "target"  # $KAFKA_MIRROR_JVM_HOME or jvm/
MAIN_CLASS = "io.kafkamirror.probe.MirrorClientProbe"
PROBE_HEAP = "128m"
JAR_PREFIX = "mirror-client-probe-"


def probe_classpath(target: Path = PROBE_TARGET) -> str:
    """``<probe jar>:<target/lib/*>`` (raises JvmArtifactsMissing when it is not built)."""
    jars = sorted(
        p
        for p in target.glob(f"{JAR_PREFIX}*.jar")
        if not p.name.endswith(("-sources.jar", "-tests.jar", "-javadoc.jar"))
    )
    lib = target / "lib"
    if not jars:
        raise JvmArtifactsMissing(target / f"{JAR_PREFIX}*.jar", "MirrorMaker 2 client probe jar")
    if not lib.is_dir() or not any(lib.glob("*.jar")):
        raise JvmArtifactsMissing(lib, "MirrorMaker 2 client probe dependencies")
    return os.pathsep.join([str(jars[-1]), str(lib / "*")])


def probe(
    command: str, client_props: Mapping[str, str], *args: str, timeout: float = 60
) -> dict[str, Any]:
    """Run one probe command against the cluster described by ``client_props``.

    ``client_props`` (at least ``bootstrap.servers``) becomes the probe's properties file and is
    passed whole to ``MirrorClient``, so ``replication.policy.*`` keys are honoured. Returns the
    parsed JSON answer; raises AssertionError (with the probe's stderr) on any failure, including
    ``timeout`` seconds passing.
    """
    classpath = probe_classpath()
    with tempfile.TemporaryDirectory(prefix="mirror-client-probe-") as tmp:
        props_file = Path(tmp) / "client.properties"
        write_properties(props_file, client_props)
        argv = [
            java_executable(),
            f"-Xmx{PROBE_HEAP}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            classpath,
            MAIN_CLASS,
            command,
            str(props_file),
            *args,
        ]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, encoding="utf-8", timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (
                exc.stderr or ""
            )
            raise AssertionError(
                f"mirror-client-probe {command} {' '.join(args)} timed out after {timeout}s\n"
                f"stderr:\n{stderr}"
            ) from exc
    where = f"mirror-client-probe {command} {' '.join(args)}"
    if done.returncode != 0:
        raise AssertionError(
            f"{where} exited {done.returncode}\nstderr:\n{done.stderr}\nstdout:\n{done.stdout}"
        )
    lines = done.stdout.strip().splitlines()
    if len(lines) != 1:
        raise AssertionError(f"{where}: expected one JSON line, got:\n{done.stdout}\n{done.stderr}")
    try:
        answer = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise AssertionError(f"{where}: bad JSON {lines[0]!r}\nstderr:\n{done.stderr}") from exc
    if not isinstance(answer, dict):
        raise AssertionError(f"{where}: expected a JSON object, got {lines[0]!r}")
    return answer
