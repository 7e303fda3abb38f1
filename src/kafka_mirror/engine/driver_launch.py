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
running one, as it does under ``spark-submit``). The command starts before PySpark is imported
(:meth:`DriverLaunch.begin`, :meth:`KeptStart.join`): the import, about 0.1 s, runs while the JVM
starts. A recorded command that does not start (a JVM that exits before its gateway answers) is
deleted and the start goes through the scripts.

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
import importlib.util
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
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
        return Path(pyspark_module("find_spark_home")._find_spark_home())

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
            "pyspark": pyspark_module("version").__version__,
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
        started = self.begin(args)
        return started.join() if started is not None else None

    def begin(self, args: Sequence[str]) -> KeptStart | None:
        """The driver's JVM started from the record for ``args``, PySpark not imported yet
        (:meth:`KeptStart.join` joins it); None when there is no record (or it did not start:
        then it is deleted)."""
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
        info_dir = tempfile.mkdtemp()
        info = os.path.join(info_dir, "conn-info")
        env = {k: v for k, v in os.environ.items() if k not in removed}
        env |= dict(added) | {"SPARK_CONNECT_MODE": "0", _CONN_INFO: info}
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env,
                                    preexec_fn=_ignore_sigint)  # as PySpark does
        except OSError as exc:
            shutil.rmtree(info_dir, ignore_errors=True)
            _not_started(path, exc)
            return None
        return KeptStart(path, proc, info)

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


class KeptStart:
    """A driver's JVM started from a kept command (``proc``), until PySpark joins its gateway
    once the JVM has written ``info``, the connection file."""

    def __init__(self, path: Path, proc: subprocess.Popen[bytes], info: str) -> None:
        self.path = path
        self.proc = proc
        self.info = info

    def join(self) -> Any:
        """PySpark's gateway to the driver; None when the JVM exits first or cannot be joined
        (then it is stopped, and the record deleted)."""
        gateway = None
        try:
            gateway = _join_gateway(self.proc, self.info)
        finally:
            shutil.rmtree(os.path.dirname(self.info), ignore_errors=True)
        if gateway is None:
            _not_started(self.path, None)
            return None
        with contextlib.suppress(OSError):
            os.utime(self.path)  # the newest records are kept
        log.debug("Spark driver JVM: started from the command kept in %s", self.path)
        return gateway


def _not_started(path: Path, exc: OSError | None) -> None:
    log.info("Spark driver JVM: the command kept in %s did not start%s; starting through "
             "spark-submit", path, f" ({exc})" if exc is not None else "")
    path.unlink(missing_ok=True)


def _join_gateway(proc: subprocess.Popen[bytes], info: str) -> Any:
    """PySpark's gateway to the JVM ``proc`` once it has written its connection file ``info``
    (read and joined as PySpark does under ``spark-submit``); None when it exits first or
    cannot be joined (then it is stopped)."""
    given = {name: os.environ.get(name) for name in _GATEWAY_ENV}
    try:
        from pyspark import java_gateway, serializers

        # PySpark's own reading of the connection file and joining of a running gateway
        pyspark_gateway: Any = java_gateway
        pyspark_serializers: Any = serializers
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
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        return None
    finally:
        for name, value in given.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    gateway.proc = proc  # PySpark keeps its own launch's process there too
    return gateway


def pyspark_module(name: str) -> Any:
    """PySpark's module ``pyspark.<name>``, loaded on its own when the package is not imported
    yet (``find_spark_home`` and ``version`` use the standard library only): importing
    ``pyspark`` takes about 0.1 s, which a start from a kept command spends while the driver's
    JVM starts rather than before it."""
    loaded = sys.modules.get(f"pyspark.{name}")
    if loaded is not None:
        return loaded
    package = importlib.util.find_spec("pyspark")  # found, not imported
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'pyspark'", name="pyspark")
    location = Path(next(iter(package.submodule_search_locations))) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"kafka_mirror_pyspark_{name}", location)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named 'pyspark.{name}'", name=f"pyspark.{name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
