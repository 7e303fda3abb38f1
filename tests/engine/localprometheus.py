"""A real Prometheus server (Debian's ``prometheus`` package) on loopback, for tests.

It scrapes the given targets every second, keeps its data in a directory of its own, and is
stopped by its PID. ``query`` asks its HTTP API (``/api/v1/query``) and returns the result
vector.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from kafka_mirror_testing.localcluster import LOOPBACK, free_port, stop_process, tail

CONFIG = """\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [{rules}]
scrape_configs:
  - job_name: kafka-mirror
    metrics_path: /metrics
    static_configs:
      - targets: [{targets}]
"""


class LocalPrometheus:
    def __init__(self, workdir: Path, targets: list[str], rule_files: Sequence[Path] = ()
                 ) -> None:
        self.dir = workdir
        self.targets = targets
        self.rule_files = list(rule_files)
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @staticmethod
    def available() -> str | None:
        return shutil.which("prometheus")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout: float = 30.0) -> Self:
        binary = self.available()
        if binary is None:
            raise RuntimeError("prometheus not found (Debian package prometheus; "
                               "scripts/setup.sh --test installs it)")
        self.dir.mkdir(parents=True, exist_ok=True)
        config = self.dir / "prometheus.yml"
        config.write_text(CONFIG.format(targets=", ".join(f"'{t}'" for t in self.targets),
                                        rules=", ".join(f"'{r}'" for r in self.rule_files)))
        self.port = free_port()
        self._log = (self.dir / "prometheus.log").open("ab")
        self._proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address={LOOPBACK}:{self.port}", "--web.enable-lifecycle",
             "--storage.tsdb.retention.time=1h"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                log = tail(self.dir / "prometheus.log")
                raise RuntimeError(f"prometheus did not start:\n{log}")
            time.sleep(0.2)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` gives now (an error from Prometheus raises)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as answer:
            document = json.loads(answer.read())
        if document.get("status") != "success":
            raise AssertionError(f"{expr}: {document}")
        result: list[dict[str, Any]] = document["data"]["result"]
        return result

    def rules(self) -> list[dict[str, Any]]:
        """Every rule Prometheus loaded, with its health and last evaluation."""
        with urllib.request.urlopen(f"{self.url}/api/v1/rules", timeout=10) as answer:
            document = json.loads(answer.read())
        return [rule for group in document["data"]["groups"] for rule in group["rules"]]

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` (None when it has no series)."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, 10.0)
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
