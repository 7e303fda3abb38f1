"""The JVM a custom ``replication.policy.class`` runs in: a small py4j gateway of its own.

Started on first use (only when mm2.properties names a policy class that kafka-mirror does not
re-implement), once per process and class path, shared by every flow; stopped at exit, and it
dies with this process in any case (py4j's die-on-broken-pipe). Its class path is, as Kafka's
``kafka-run-class.sh`` builds it for MirrorMaker 2, ``$CLASSPATH`` first (where the policy's jar
is), then Kafka's ``connect-mirror-client`` and ``kafka-clients`` from the spark-connector jars
and pyspark's ``slf4j-api`` (Kafka's policies log through it; no binding: logging is off).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import Any

from kafka_mirror import jvm_artifacts
from kafka_mirror.errors import MirrorError

JAVA_OPTIONS = ("-Xmx64m", "-Dslf4j.internal.verbosity=ERROR")
STOP_SECONDS = 5.0

_lock = threading.Lock()
_gateways: dict[str, Any] = {}


class PolicyJvmError(MirrorError):
    """The policy JVM could not be started."""


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _slf4j_api() -> list[str]:
    return [str(j) for j in sorted(_pyspark_jars().glob("slf4j-api-*.jar"))]


def _py4j_jar() -> str:
    """py4j's jar, where py4j looks for it (``<prefix>/share/py4j``), else pyspark's copy."""
    from py4j.java_gateway import find_jar_path

    found = str(find_jar_path())
    if found:
        return found
    copies = sorted(_pyspark_jars().glob("py4j-*.jar"))
    if not copies:
        raise PolicyJvmError("py4j's jar not found (neither py4j's share/py4j nor pyspark/jars)")
    return str(copies[-1])


def classpath() -> str:
    """``$CLASSPATH``, then connect-mirror-client, kafka-clients and slf4j-api."""
    user = [entry for entry in os.environ.get("CLASSPATH", "").split(os.pathsep) if entry]
    ours = [str(j) for j in jvm_artifacts.mirror_client_jars()] + _slf4j_api()
    return os.pathsep.join(user + ours)


def gateway() -> Any:
    """The running policy JVM's ``JavaGateway`` for the current class path (started if needed)."""
    path = classpath()
    with _lock:
        found = _gateways.get(path)
        if found is None:
            found = _gateways[path] = _launch(path)
        return found


def _launch(path: str) -> Any:
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    try:
        java = jvm_artifacts.java_executable()
    except FileNotFoundError as exc:
        raise PolicyJvmError(f"cannot start the JVM for replication.policy.class: {exc}") from None
    stderr: deque[str] = deque(maxlen=20)
    try:
        port, token, proc = launch_gateway(
            jarpath=_py4j_jar(), classpath=path, javaopts=list(JAVA_OPTIONS), die_on_exit=True,
            redirect_stderr=stderr, java_path=java, enable_auth=True, return_proc=True,
        )
    except (OSError, ValueError) as exc:  # ValueError: no port printed (the JVM did not start)
        tail = "".join(reversed(stderr)).strip()
        raise PolicyJvmError(
            f"cannot start the JVM for replication.policy.class ({java}): {exc}"
            + (f": {tail}" if tail else "")
        ) from None
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auth_token=token))
    atexit.register(_stop, gateway, proc)
    return gateway


def _stop(gateway: Any, proc: subprocess.Popen[bytes]) -> None:
    """Close the connections, then close the JVM's stdin: py4j's server exits on that."""
    with contextlib.suppress(Exception):  # at exit: the JVM may be gone already
        gateway.close()
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(STOP_SECONDS)
