"""The latency probe: a consumer process per cluster that stamps the time each record reaches it
and subtracts the produce time the record carries (see ``workload.stamp``).

Method, identical for every mirror: the probe reads the mirrored topic on the destination with
``fetch.min.bytes=1`` (a fetch returns as soon as one record is there) in a loop that takes
everything already fetched without waiting (``consume(timeout=0)``) and otherwise blocks in
``poll()`` for the next record; each record's receive time is ``time.time_ns()`` right after the
call that returned it. So the latency is "produce() called on the source" to "record readable on
the destination and fetched by a consumer". The same probe on the source topic (no mirror) shows
what producer, broker and probe alone add: the floor every mirror figure includes.

Per phase of the run (the phase number is in each value) it keeps the latencies, the record
count, and the largest gap between two consecutive records of the same partition of the same
phase as received (a stalled partition shows up there).
"""

from __future__ import annotations

import os
import queue
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from .workload import read_stamp


@dataclass
class PhaseStats:
    records: int = 0
    latency_us: array[int] = field(default_factory=lambda: array("q"))
    max_gap_ns: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latency_us)
        return {
            "records": self.records,
            "per_topic": dict(self.per_topic),
            "latency_ms": percentiles(ordered),
            "max_partition_gap_ms": self.max_gap_ns / 1e6,
        }


def percentiles(ordered: list[int]) -> dict[str, float | None]:
    """Nearest-rank p50/p90/p99/p99.9, min and max of sorted microsecond values, in ms."""
    if not ordered:
        return {"p50": None, "p90": None, "p99": None, "p99.9": None, "min": None, "max": None}

    def rank(q: float) -> float:
        index = max(0, min(len(ordered) - 1, int(-(-q * len(ordered) // 1)) - 1))
        return ordered[index] / 1000.0

    return {
        "p50": rank(0.50),
        "p90": rank(0.90),
        "p99": rank(0.99),
        "p99.9": rank(0.999),
        "min": ordered[0] / 1000.0,
        "max": ordered[-1] / 1000.0,
    }


def latency_probe(bootstrap: str, name: str, commands: Any, replies: Any) -> None:
    """Consumer process. Commands: ``("assign", [(topic, partition), ...])`` adds partitions
    (read from their beginning), ``("gap_topic", topic)`` tracks the receive gaps of that topic's
    partitions, ``("counts",)`` replies ``{phase: records}``, ``("report",)`` replies the
    per-phase summaries, ``("exit",)`` ends it."""
    parent = os.getppid()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-latency-probe-{name}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.min.bytes": 1,
            "fetch.wait.max.ms": 100,
            "enable.partition.eof": False,
            "client.id": f"latency-probe-{name}",
        }
    )
    phases: dict[int, PhaseStats] = {}
    # (topic, partition) -> (phase, receive ns) of the last record
    last: dict[tuple[str, int], tuple[int, int]] = {}
    gap_topics: set[str] = set()
    assigned = False
    try:
        while True:
            try:
                command = commands.get_nowait()
            except queue.Empty:
                command = None
            if command is not None:
                if command[0] == "assign":
                    tps = [TopicPartition(t, p, OFFSET_BEGINNING) for t, p in command[1]]
                    consumer.incremental_assign(tps)
                    assigned = True
                elif command[0] == "gap_topic":
                    gap_topics.add(command[1])
                elif command[0] == "counts":
                    replies.put({k: v.records for k, v in phases.items()})
                elif command[0] == "report":
                    replies.put(
                        {
                            "name": name,
                            "phases": {k: v.summary() for k, v in sorted(phases.items())},
                        }
                    )
                elif command[0] == "exit":
                    return
            if os.getppid() != parent:
                return
            if not assigned:
                time.sleep(0.05)
                continue
            batch = consumer.consume(num_messages=2000, timeout=0)
            received = time.time_ns()
            if not batch:
                msg = consumer.poll(0.05)
                received = time.time_ns()
                if msg is None:
                    continue
                batch = [msg]
            for msg in batch:
                if msg.error():
                    continue
                value = msg.value()
                if value is None:
                    continue
                phase, produced = read_stamp(value)
                stats = phases.get(phase)
                if stats is None:
                    stats = phases[phase] = PhaseStats()
                stats.records += 1
                stats.latency_us.append((received - produced) // 1000)
                topic = msg.topic() or ""
                stats.per_topic[topic] = stats.per_topic.get(topic, 0) + 1
                if topic in gap_topics:
                    key = (topic, msg.partition() or 0)
                    previous = last.get(key)
                    if previous is not None and previous[0] == phase:
                        stats.max_gap_ns = max(stats.max_gap_ns, received - previous[1])
                    last[key] = (phase, received)
    except KeyboardInterrupt:
        return
    finally:
        consumer.close()
