"""A throw-away Spark standalone cluster on loopback: one master and N workers, each its own JVM
started with pyspark's ``bin/spark-class`` and stopped by PID (executors are the workers' children:
each worker is given time to end them, then any left are killed by PID). Used by the benchmark's
cluster mode and by the tests that lose an executor."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from kafka_mirror_testing.localcluster import LOOPBACK, free_port, stop_process, tail
from kafka_mirror_testing.waiting import PATIENCE


def _descendants(pid: int) -> list[int]:
    try:
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def spark_home() -> Path:
    """pyspark's package directory: a Spark distribution (``bin/``, ``jars/``)."""
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandalone:
    """``spark://127.0.0.1:PORT``: ``workers`` workers of ``cores`` cores and ``memory`` each."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 daemon_heap: str = "256m") -> None:
        self.workdir = workdir
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_heap = daemon_heap
        self.port = free_port()
        self.url = f"spark://{LOOPBACK}:{self.port}"
        self._procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_DAEMON_MEMORY": self.daemon_heap,  # -Xmx of master and workers
            "SPARK_LOG_DIR": str(self.workdir),
            "SPARK_NO_DAEMONIZE": "1",
        })
        return env

    def _launch(self, name: str, argv: list[str]) -> Path:
        log_path = self.workdir / f"{name}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *argv],
                cwd=self.workdir, env=self._env(),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs.append((name, proc, log_path))
        return log_path

    def _wait_for(self, log_path: Path, marker: str, timeout: float) -> None:
        timeout *= PATIENCE
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in tail(log_path, 400):
                return
            if any(p.poll() is not None for _, p, _ in self._procs):
                why = "a Spark process exited"
                break
            time.sleep(0.2)
        else:
            why = f"{timeout:.0f} s passed"
        raise RuntimeError(f"Spark standalone: {marker!r} not in {log_path} ({why}):\n"
                           f"{tail(log_path, 30)}")

    def start(self, timeout: float = 120.0) -> str:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            master_log = self._launch("spark-master", [
                "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                "--port", str(self.port), "--webui-port", str(free_port()),
            ])
            self._wait_for(master_log, "I have been elected leader", timeout)
            for index in range(self.workers):
                work = self.workdir / f"worker{index}"
                work.mkdir(exist_ok=True)
                worker_log = self._launch(f"spark-worker{index}", [
                    "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                    "--port", str(free_port()), "--webui-port", str(free_port()),
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(work), self.url,
                ])
                self._wait_for(worker_log, "Successfully registered with master", timeout)
        except BaseException:
            self.stop()
            raise
        return self.url

    def pids(self) -> list[int]:
        """The workers' PIDs (their executors are their children)."""
        return [proc.pid for name, proc, _ in self._procs if name.startswith("spark-worker")]

    def executors(self) -> list[int]:
        """The PIDs of the executors the workers run now (``CoarseGrainedExecutorBackend``)."""
        found = []
        for worker in self.pids():
            for pid in _descendants(worker):
                with contextlib.suppress(psutil.Error):
                    if any("CoarseGrainedExecutorBackend" in arg
                           for arg in psutil.Process(pid).cmdline()):
                        found.append(pid)
        return found

    def stop(self) -> None:
        """Workers first (each ends its executors), then the master; by PID only."""
        for _name, proc, _log in reversed(self._procs):
            executors = _descendants(proc.pid)  # its executors, and theirs
            stop_process(proc, 20.0)
            for pid in executors:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._procs.clear()
