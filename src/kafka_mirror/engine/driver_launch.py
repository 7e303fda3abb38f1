"""The Spark driver's JVM started from the command Spark's own scripts built for the same inputs
at an earlier start, without running those scripts again.

PySpark starts the driver through ``bin/spark-submit``: bash scripts, then a JVM of Spark's
launcher (``org.apache.spark.launcher.Main``) that prints the driver's command, which the script
then ``exec``s under the PID PySpark started. That is about 0.15-0.2 s on an idle 2-core machine
(more while the control plane starts beside it) before the driver's JVM runs, at every start,
for a command that only changes with its inputs.

A start whose inputs have no record goes that way, and the driver's command line and the
environment the scripts gave it are then read from ``/proc/<pid>`` (``cmdline``, ``environ``)
and kept, one small file per set of inputs. A later start with the same inputs runs that command
itself and hands PySpark the gateway (:func:`pyspark.java_gateway.launch_gateway` joins a
running one, as it does under ``spark-submit``). A recorded command that does not start (a JVM
that exits before its gateway answers) is deleted and the start goes through the scripts.

The inputs: the arguments PySpark passes to ``spark-submit``, the environment variables Spark's
scripts and launcher read (checked in Spark 4.2's launcher: ``SPARK_*``, ``PYSPARK_*``,
``HADOOP_CONF_DIR``, ``YARN_CONF_DIR``, ``JAVA_HOME``; with ``PATH``, which finds ``java``),
``SPARK_HOME``, its jars and PySpark's version, and the conf dir's ``spark-defaults.conf``. A conf
dir with a ``spark-env.sh`` (a script whose effect is only known by running it) always goes
through the scripts, as does any platform without ``/proc``. Values that change at every start
(the class list :mod:`kafka_mirror.engine.class_data` names after the process) are given as
``volatile``: placeholders in the record, put back at the start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# the records kept: the newest ones (a host's mirrors may share the directory)
KEPT_RECORDS = 8
RECORD_SUFFIX = ".launch.json"
# how often the start looks for the gateway's connection file (PySpark: every 0.1 s)
POLL_SECONDS = 0.01
# environment variables Spark's scripts and launcher read
_ENV_PREFIXES = ("SPARK", "PYSPARK", "_SPARK", "HADOOP_", "YARN_")
_ENV_NAMES = ("JAVA_HOME", "PATH", "LD_LIBRARY_PATH")
# set by PySpark for every launch, and by bash in every script: never recorded
_CONN_INFO = "_PYSPARK_DRIVER_CONN_INFO_PATH"
_NOT_RECORDED = (_CONN_INFO, "PWD", "OLDPWD", "SHLVL", "_")
_GATEWAY_ENV = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")


def submit_args(conf: Mapping[str, str]) -> list[str]:
    """What PySpark passes to ``spark-submit`` for ``conf`` (``launch_gateway``)."""
    args: list[str] = []
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args + shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))


class DriverLaunch:
    """The driver's launch records in ``directory``; ``volatile``: values of this start that
    change at every start (kept as placeholders)."""

    def __init__(self, directory: Path, volatile: Sequence[str] = ()) -> None:
        self.directory = directory
        self.volatile = [v for v in volatile if v]
        # the record's name and the environment of a start through spark-submit under way
        self._pending: tuple[str, dict[str, str]] | None = None

    def _spark_home(self) -> Path:
        from pyspark.find_spark_home import _find_spark_home

        return Path(_find_spark_home())

    def usable(self) -> bool:
        """Whether this platform and Spark set-up can start the driver from a record."""
        if os.name != "posix" or not Path("/proc/self/cmdline").exists():
            return False
        if any(name in os.environ for name in _GATEWAY_ENV):
            return False  # PySpark joins a gateway that runs already
        conf_dir = os.environ.get("SPARK_CONF_DIR") or str(self._spark_home() / "conf")
        return not (Path(conf_dir) / "spark-env.sh").exists()

    def _masked(self, text: str) -> str:
        for index, value in enumerate(self.volatile):
            text = text.replace(value, f"<volatile {index}>")
        return text

    def _unmasked(self, text: str) -> str:
        for index, value in enumerate(self.volatile):
            text = text.replace(f"<volatile {index}>", value)
        return text

    def key(self, args: Sequence[str]) -> str:
        """The record's name for these ``spark-submit`` arguments and this environment."""
        import pyspark

        home = self._spark_home()
        conf_dir = Path(os.environ.get("SPARK_CONF_DIR") or home / "conf")
        defaults = conf_dir / "spark-defaults.conf"
        jars = home / "jars"
        inputs = {
            "args": [self._masked(a) for a in args],
            "env": {k: v for k, v in sorted(os.environ.items())
                    if (k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES) and k != _CONN_INFO},
            "java": shutil.which("java"),
            "spark_home": str(home),
            "pyspark": pyspark.__version__,
            "jars": sorted(os.listdir(jars)) if jars.is_dir() else [],
            "spark_defaults": defaults.read_text(encoding="utf-8", errors="replace")
            if defaults.is_file() else None,
        }
        text = json.dumps(inputs, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}{RECORD_SUFFIX}"

    def start(self, args: Sequence[str]) -> Any:
        """The driver started from the record for ``args`` and PySpark's gateway to it; None
        when there is no record (or it did not start: then it is deleted)."""
        self._pending = None
        if not self.usable():
            return None
        key = self.key(args)
        # what spark-submit is started with if there is no record (PySpark adds this one)
        self._pending = (key, dict(os.environ) | {"SPARK_CONNECT_MODE": "0"})
        path = self._path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            command = [self._unmasked(str(a)) for a in record["command"]]
            added = {str(k): self._unmasked(str(v)) for k, v in record["env"].items()}
            removed = [str(k) for k in record["unset"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if not command or not Path(command[0]).is_file():
            path.unlink(missing_ok=True)
            return None
        gateway = _start_gateway(command, added, removed)
        if gateway is None:
            log.info("Spark driver JVM: the command kept in %s did not start; starting through "
                     "spark-submit", path)
            path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # the newest records are kept
        log.debug("Spark driver JVM: started from the command kept in %s", path)
        return gateway

    def record(self, pid: int) -> None:
        """After :meth:`start` found no record and PySpark started the driver through
        ``spark-submit`` (process ``pid``): keep the command and environment the scripts started
        it with, for the next start with the same inputs."""
        if self._pending is None:
            return
        key, env = self._pending
        self._pending = None
        try:
            if Path(os.readlink(f"/proc/{pid}/exe")).name != "java":
                return  # not the driver's JVM (yet): nothing to keep
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")[:-1]
        except OSError as exc:
            log.debug("Spark driver JVM: launch command not read (%s)", exc)
            return
        if not command:
            return  # read between exec and the new program's arguments: nothing to keep
        seen = dict(line.decode("utf-8", "surrogateescape").partition("=")[::2]
                    for line in environ)
        added = {k: self._masked(v) for k, v in seen.items()
                 if env.get(k) != v and k not in _NOT_RECORDED}
        record = {
            "command": [self._masked(a.decode("utf-8", "surrogateescape")) for a in command],
            "env": added,
            "unset": sorted(k for k in env if k not in seen and k not in _NOT_RECORDED),
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        # the command holds the Spark settings, as the driver's command line does: owner only
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as out:
            json.dump(record, out)
        os.replace(partial, path)
        self._prune()

    def _prune(self) -> None:
        records = sorted(self.directory.glob(f"*{RECORD_SUFFIX}"),
                         key=lambda p: p.stat().st_mtime, reverse=True)
        for old in records[KEPT_RECORDS:]:
            old.unlink(missing_ok=True)


def _start_gateway(command: list[str], added: Mapping[str, str], removed: Sequence[str]
                   ) -> Any:
    """The driver's JVM run as PySpark runs ``spark-submit`` (stdin a pipe, whose end stops
    it; SIGINT ignored), joined through PySpark once its gateway answers; None when it does not
    run, exits first or cannot be joined (then it is stopped)."""
    from pyspark import java_gateway, serializers

    # PySpark's own reading of the connection file and joining of a running gateway (untyped)
    pyspark_gateway: Any = java_gateway
    pyspark_serializers: Any = serializers
    info_dir = tempfile.mkdtemp()
    proc: subprocess.Popen[bytes] | None = None
    given = {name: os.environ.get(name) for name in _GATEWAY_ENV}
    try:
        info = os.path.join(info_dir, "conn-info")
        env = {k: v for k, v in os.environ.items() if k not in removed}
        env |= dict(added) | {"SPARK_CONNECT_MODE": "0", _CONN_INFO: info}
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env,
                                preexec_fn=_ignore_sigint)  # as PySpark does
        while proc.poll() is None and not os.path.isfile(info):
            time.sleep(POLL_SECONDS)
        if not os.path.isfile(info):
            proc.wait()
            return None
        # the file is renamed into place once written (PythonGatewayServer)
        with open(info, "rb") as stream:
            port = pyspark_serializers.read_int(stream)
            secret = pyspark_serializers.UTF8Deserializer().loads(stream)
        os.environ["PYSPARK_GATEWAY_PORT"] = str(port)
        os.environ["PYSPARK_GATEWAY_SECRET"] = secret
        gateway = pyspark_gateway.launch_gateway()
    except Exception as exc:
        log.debug("Spark driver JVM: the kept command did not start (%s)", exc)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        return None
    finally:
        shutil.rmtree(info_dir, ignore_errors=True)
        for name, value in given.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    gateway.proc = proc  # PySpark keeps its own launch's process there too
    return gateway


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
