"""The fixed-rate producer: Kafka's Java producer in a JVM of its own
(``jvm/bench-producer``, ``io.kafkamirror.bench.FixedRateProducer``), driven by lines on its stdin.

Java's producer puts every partition of a broker that has a batch ready into one ProduceRequest.
librdkafka (the benchmark's producer until stop 56) sends a request per partition: at 2,000
partitions x 2,000 records/s that is a request per record, the source broker's acknowledgements
fell behind (p50 15-24 s measured with no mirror at all) and every mirror's latency carried it.
Values start with :func:`workload.stamp` (phase and produce time), the rest is the workload's
filler; keys are ``key-%010d`` of a running sequence.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from kafka_mirror.jvm_artifacts import JvmArtifactsMissing, java_executable, jvm_home

from .common import MirrorFailed
from .workload import corpus

TARGET = jvm_home() / "bench-producer" / "target"
MAIN_CLASS = "io.kafkamirror.bench.FixedRateProducer"
# The producer's heap: the 128 MiB buffer.memory and room besides, plus an lz4 stream (a 64 KiB
# block and its compressed copy) per batch not yet sent, which can be one per partition while the
# broker is slow: 768 MiB ran out of heap at 10,000 partitions x 2,000 records/s
HEAP_MB = 768
HEAP_MB_PER_PARTITION = 0.15


def heap_mb(partitions: int) -> int:
    """The producer's ``-Xmx`` in MiB for a workload over ``partitions`` partitions."""
    return max(HEAP_MB, 256 + int(partitions * HEAP_MB_PER_PARTITION))
JAR = "bench-producer-*.jar"
ANSWER_TIMEOUT_S = 180.0
# lines of its log a failure of the producer quotes
LOG_TAIL_LINES = 8


def classpath(target: Path = TARGET) -> str:
    """``<jar>:<target/lib/*>`` (raises JvmArtifactsMissing when it is not built)."""
    jars = sorted(target.glob(JAR))
    if not jars:
        raise JvmArtifactsMissing(target / JAR, "benchmark producer jar")
    lib = target / "lib"
    if not any(lib.glob("*.jar")):
        raise JvmArtifactsMissing(lib, "benchmark producer dependencies")
    return os.pathsep.join([str(jars[-1]), str(lib / "*")])


def parse_answer(lines: Sequence[str]) -> dict[str, Any]:
    """The producer's answer to ``counts``/``exit`` (the lines before ``end``); ``acked_ms`` is
    the p50/p99/max from each record's produce time to its acknowledgement by the source,
    ``sent`` the records sent and the longest time one round of sends took (a send that blocks
    keeps the schedule back: fewer records, not more latency)."""
    counts: dict[tuple[int, str, int], int] = {}
    first_ns: dict[str, int] = {}
    errors: list[str] = []
    failed = 0
    acked_ms: dict[str, float | None] = {}
    sent: dict[str, float] = {}
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "count":
            phase, topic, partition, records = rest.split(" ")
            counts[(int(phase), topic, int(partition))] = int(records)
        elif word == "first":
            name, ns = rest.split(" ")
            first_ns[name] = int(ns)
        elif word == "failed":
            failed = int(rest)
        elif word == "error":
            errors.append(rest)
        elif word == "sent":
            records, slowest = rest.split(" ")
            sent = {"records": int(records), "slowest_send_ms": float(slowest)}
        elif word == "acked_ms":
            values = [None if v == "-" else float(v) for v in rest.split(" ")]
            acked_ms = dict(zip(("p50", "p99", "max"), values, strict=True))
        else:
            raise MirrorFailed(f"the fixed-rate producer answered {line!r}")
    return {"counts": counts, "first_ns": first_ns, "undelivered": failed, "errors": errors,
            "acked_ms": acked_ms, "sent": sent}


class RateProducer:
    """Streams of records at fixed rates into the source cluster (open loop: the schedule is kept
    when the broker is slow, so that stalls show as latency, not as fewer records)."""

    def __init__(self, bootstrap: str, record_size: int, compression: str, workdir: Path,
                 partitions: int = 0) -> None:
        """``partitions``: how many the streams will write to in all (sizes the heap)."""
        workdir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="bench-producer-filler-", dir=workdir)
        with os.fdopen(fd, "wb") as out:
            out.write(corpus(record_size))
        self.filler = Path(name)
        self.log_path = workdir / "bench-producer.log"
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [java_executable(), f"-Xmx{heap_mb(partitions)}m", "-XX:+UseSerialGC", "-cp",
             classpath(), MAIN_CLASS,
             bootstrap, str(record_size), compression, str(self.filler)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            encoding="ascii",
        )
        self._lines: list[str] = []
        self._answer = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,),
                                        name="bench-producer-answers", daemon=True)
        self._reader.start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            with self._answer:
                self._lines.append(line.rstrip("\n"))
                self._answer.notify_all()
        with self._answer:
            self._answer.notify_all()

    def _send(self, line: str) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise self._ended() from None

    def _ended(self) -> MirrorFailed:
        """The producer's end, with the last lines it wrote to its log (the work directory
        that holds the log may be removed)."""
        self._log.flush()
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        tail = "".join(f"\n  {line}" for line in lines[-LOG_TAIL_LINES:])
        return MirrorFailed(f"the fixed-rate producer ended; see {self.log_path}{tail}")

    def stream(
        self, name: str, topic: str, partitions: Sequence[int], rate: float, phase: int
    ) -> None:
        """Start (or replace) stream ``name``: ``rate`` records/s round-robin over
        ``partitions``; the producer waits (up to 30 s) until each has a leader first."""
        self._send(f"stream {name} {topic} {phase} {rate!r} {','.join(map(str, partitions))}")

    def stop_stream(self, name: str) -> None:
        self._send(f"stop {name}")

    def counts(self) -> dict[str, Any]:
        """Flush, then ``{"counts": {(phase, topic, partition): acknowledged}, "first_ns":
        {stream: first produce time}, ...}``; raises MirrorFailed when a record was not
        delivered."""
        reply = self._ask("counts")
        if reply["undelivered"]:
            raise MirrorFailed(f"{reply['undelivered']} records not delivered: {reply['errors']}")
        return reply

    def _ask(self, command: str) -> dict[str, Any]:
        with self._answer:
            self._lines.clear()
        self._send(command)
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        with self._answer:
            while "end" not in self._lines:
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise self._ended()
                if time.monotonic() > deadline:
                    raise MirrorFailed("the fixed-rate producer did not answer")
                self._answer.wait(timeout=1.0)
            lines = self._lines[: self._lines.index("end")]
            self._lines.clear()
        return parse_answer(lines)

    def stop(self) -> None:
        """End the producer (flushing what it holds) and remove its filler file."""
        if self.process.poll() is None:
            try:
                self._send("exit")
                self.process.wait(timeout=30)
            except (MirrorFailed, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)
        self._log.close()
        self.filler.unlink(missing_ok=True)
