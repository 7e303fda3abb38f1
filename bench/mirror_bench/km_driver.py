"""Driver for kafka-mirror (``kafka-mirror run``, Spark's local mode or a throw-away Spark
standalone cluster), optionally with its metrics endpoint on and scraped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka_mirror_testing.localcluster import (
    LocalKafkaCluster,
    free_port,
    stop_process,
    tail,
    write_properties,
)
from kafka_mirror_testing.spark_standalone import SparkStandalone

from .common import (
    CONSUMER_TUNING,
    KM_AT_LEAST_ONCE,
    KM_COLD,
    KM_METRICS,
    KM_STANDALONE,
    PRODUCER_TUNING,
    SOURCE_ALIAS,
    SOURCE_TOPIC,
    TARGET_ALIAS,
    second_km_label,
)
from .measures import Measurement, MirrorResult, TreeSampler, log_time, measure
from .workload import Workload

NAME = "kafka-mirror"
# Logged once the Spark query runs ("mirroring 1 topics, 8 partitions (checkpoint ...").
READY_MARKER = "partitions (checkpoint"


def kafka_mirror_executable() -> list[str]:
    script = Path(sys.executable).parent / "kafka-mirror"
    if script.is_file():
        return [str(script)]
    found = shutil.which("kafka-mirror")
    return [found] if found else [sys.executable, "-m", "kafka_mirror.cli.main"]


def realtime_settings(settings: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The settings of the second kafka-mirror (``--km-realtime``, ``--km-micro-batch``),
    refused unless kafka-mirror knows each key."""
    from kafka_mirror.config.keys import FLOW_KEYS

    def flow_key(key: str) -> str:  # "A->B.key" is the flow's own "key"
        head, _, rest = key.partition(".")
        return rest if "->" in head else key

    unknown = [k for k, _ in settings if flow_key(k) not in FLOW_KEYS]
    if unknown:
        raise SystemExit(
            f"--km-realtime-setting: kafka-mirror does not know {', '.join(unknown)} (not in "
            "kafka_mirror.config.keys.FLOW_KEYS): the key was renamed or is not built yet; give "
            "it with --km-realtime-setting KEY=VALUE"
        )
    return dict(settings)


def kafka_mirror_config(
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    max_records_per_batch: int | None,
    producer_extra: Mapping[str, str],
    *,
    topics: str = SOURCE_TOPIC,
    refresh_seconds: int = 5,
    consumer: Mapping[str, str] = CONSUMER_TUNING,
    producer: Mapping[str, str] = PRODUCER_TUNING,
    consumer_extra: Mapping[str, str] | None = None,
    class_data_dir: Path | None = None,
) -> dict[str, str]:
    """kafka-mirror's mm2.properties: the same client tuning keys as MirrorMaker 2's; the Spark
    driver's class data archive in ``class_data_dir`` (None: without one, a first start)."""
    props: dict[str, str] = {
        "clusters": f"{SOURCE_ALIAS}, {TARGET_ALIAS}",
        f"{SOURCE_ALIAS}.bootstrap.servers": source.bootstrap,
        f"{TARGET_ALIAS}.bootstrap.servers": destination.bootstrap,
        f"{SOURCE_ALIAS}->{TARGET_ALIAS}.enabled": "true",
        f"{SOURCE_ALIAS}->{TARGET_ALIAS}.topics": topics,
        f"{TARGET_ALIAS}->{SOURCE_ALIAS}.enabled": "false",
        "replication.factor": "1",
        "refresh.topics.interval.seconds": str(refresh_seconds),
    }
    if class_data_dir is None:
        props["mirror.class.data.sharing"] = "false"
    else:
        props["mirror.class.data.dir"] = str(class_data_dir)
    if max_records_per_batch is not None:
        props["mirror.max.records.per.batch"] = str(max_records_per_batch)
    consumed = dict(consumer) | dict(consumer_extra or {})
    props.update({f"{SOURCE_ALIAS}.consumer.{k}": v for k, v in consumed.items()})
    tuned = dict(producer) | dict(producer_extra)
    props.update({f"{TARGET_ALIAS}.producer.{k}": v for k, v in tuned.items()})
    return props


class KafkaMirrorProcess:
    """``kafka-mirror run`` as a child process, stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, props: Mapping[str, str], workdir: Path, spark_conf: Mapping[str, str]):
        self.workdir = workdir
        self.config_path = workdir / "mm2.properties"
        self.state_dir = workdir / "state"
        self.log_path = workdir / "kafka-mirror.log"
        self.props = dict(props)
        self.spark_conf = dict(spark_conf)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def argv(self) -> list[str]:
        argv = [
            *kafka_mirror_executable(),
            "run",
            str(self.config_path),
            "--state-dir",
            str(self.state_dir),
        ]
        for key, value in self.spark_conf.items():
            argv += ["--spark-conf", f"{key}={value}"]
        return argv

    def start(self) -> int:
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_properties(self.config_path, self.props)
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv(),
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sampler: TreeSampler | None, timeout: float = 60.0) -> None:
        proc = self.proc
        if proc is not None:
            stop_process(proc, timeout)
            # The Spark driver JVM exits when its Python parent does; make sure, by PID.
            if sampler is not None:
                deadline = time.monotonic() + 15
                while sampler.live_descendants() and time.monotonic() < deadline:
                    time.sleep(0.2)
                for pid in sampler.live_descendants():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None


class MetricsScraper:
    """Scrapes kafka-mirror's ``/metrics`` at a fixed interval, as Prometheus would, so that the
    "metrics on" run pays for serving them too."""

    def __init__(self, url: str, interval: float = 5.0) -> None:
        self.url = url
        self.interval = interval
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(self.url, timeout=self.interval) as response:
                    response.read()
                self.scrapes += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)


def run_kafka_mirror(
    workdir: Path,
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    payload_bytes: int,
    driver_memory: str,
    max_records_per_batch: int | None,
    spark_extra: Mapping[str, str],
    producer_extra: Mapping[str, str],
    timeout: float,
    metrics: bool = False,
    exactly_once: bool = True,
    standalone: SparkStandalone | None = None,
    consumer_extra: Mapping[str, str] | None = None,
    realtime: Mapping[str, str] | None = None,
    class_data_dir: Path | None = None,
) -> MirrorResult:
    """One kafka-mirror run; ``metrics`` turns its metrics endpoint on (scraped),
    ``exactly_once=False`` sets ``mirror.exactly.once.target = false`` (at-least-once), and
    ``standalone`` runs it on that (started) Spark cluster, whose CPU and memory count too."""
    props = kafka_mirror_config(
        source, destination, workload, max_records_per_batch, producer_extra,
        consumer_extra=consumer_extra, class_data_dir=class_data_dir,
    )
    if not exactly_once:
        props["mirror.exactly.once.target"] = "false"
    if realtime is not None:
        props.update(realtime)
    scraper: MetricsScraper | None = None
    if metrics:
        port = free_port()
        props["mirror.metrics.port"] = str(port)
        props["mirror.metrics.bind.address"] = "127.0.0.1"
        scraper = MetricsScraper(f"http://127.0.0.1:{port}/metrics")
    spark_conf = {"spark.driver.memory": driver_memory, **spark_extra}
    if standalone is not None:
        spark_conf |= {
            "spark.master": standalone.url,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": standalone.memory,
            "spark.cores.max": str(standalone.workers * standalone.cores),
        }
    mirror = KafkaMirrorProcess(props, workdir, spark_conf)
    started: list[Measurement] = []
    if scraper is not None:
        scraper.start()
    try:
        label = (KM_STANDALONE if standalone is not None else KM_METRICS if metrics
                 else second_km_label(realtime) if realtime is not None
                 else KM_AT_LEAST_ONCE if not exactly_once
                 else NAME if class_data_dir is not None else KM_COLD)
        result = measure(
            label,
            mirror.start,
            mirror.alive,
            mirror.log_path,
            source,
            destination,
            workload,
            payload_bytes,
            timeout,
            started.append,
            also=standalone.pids() if standalone is not None else (),
        )
    finally:
        if scraper is not None:
            scraper.stop()
        mirror.stop(started[0].sampler if started else None)
    if scraper is not None:
        result.extra["metrics_scrapes"] = scraper.scrapes
        result.extra["metrics_scrape_seconds"] = scraper.interval
    result.ready_seconds = log_time(mirror.log_path, READY_MARKER, started[0].started_wall)
    result.config = dict(props)
    result.extra["spark_conf"] = spark_conf
    result.extra["progress_log"] = [
        line for line in tail(mirror.log_path, 400).splitlines() if "records," in line
    ][-5:]
    return result
