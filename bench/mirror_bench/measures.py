"""What is measured of a mirror: CPU and RSS of its process tree (from ``/proc``), the CPU of the
brokers and of the rest of the machine, and the time until records arrive on the destination."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kafka_mirror_testing.localcluster import LocalKafkaCluster, tail

from .clusters import admin_client, end_offsets
from .common import CLK_TCK, MB, POLL_INTERVAL, SAMPLE_INTERVAL, TARGET_TOPIC, MirrorFailed
from .workload import Workload


def _read_stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, starttime, utime+stime ticks) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    # fields[0] is state (field 3); utime, stime are fields 14, 15; starttime is field 22.
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12])


def _read_rss_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB; zeros if the process is gone."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return "?"


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (by scanning ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read_stat(int(entry))
        if stat is not None:
            children.setdefault(stat[0], []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


# JVM threads by what they do: the JIT compilers' and the garbage collector's CPU is the part of
# a JVM's CPU that is not the mirror's own work (thread names of HotSpot 17)
THREAD_GROUPS = (
    ("jit", ("C1 CompilerThre", "C2 CompilerThre")),
    ("gc", ("GC Thread", "G1 ", "VM Thread")),
)


def thread_group_ticks(pids: Sequence[int]) -> dict[str, int]:
    """CPU ticks of the JIT compiler and GC threads of the processes ``pids`` (threads that
    ended are not counted; HotSpot's compiler and GC threads live as long as the JVM)."""
    out = {group: 0 for group, _ in THREAD_GROUPS}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            name = data[data.find(b"(") + 1 : data.rfind(b")")].decode(errors="replace")
            fields = data[data.rfind(b")") + 2 :].split()
            for group, prefixes in THREAD_GROUPS:
                if name.startswith(prefixes):
                    out[group] += int(fields[11]) + int(fields[12])
                    break
    return out


def machine_busy_ticks() -> int:
    """Busy (non-idle, non-iowait) CPU ticks of the whole machine, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return user + nice + system + irq + softirq + steal


class TreeSampler:
    """Samples CPU ticks and RSS of a process tree every ``interval`` seconds.

    Memory counts only processes that have lived for at least ``MIN_AGE`` seconds: a JVM that
    starts a helper (``chmod``, ``readlink``, ``jspawnhelper``) forks first, and until the exec
    the child shows the parent's whole RSS -- counting it would double the figure.
    """

    MIN_AGE = 0.4

    def __init__(self, root: int, interval: float = SAMPLE_INTERVAL,
                 also: Sequence[int] = ()) -> None:
        self.root = root
        # other trees that work for the mirror (a Spark cluster's workers and their executors);
        # only their CPU from now on counts
        self.also = tuple(also)
        self.base: dict[tuple[int, int], int] = {}
        self.own: set[tuple[int, int]] = set()  # seen in the root's tree
        self.interval = interval
        self.ticks: dict[tuple[int, int], int] = {}  # (pid, starttime) -> utime+stime
        self.hwm_kb: dict[tuple[int, int], int] = {}
        self.names: dict[tuple[int, int], str] = {}
        self.first_seen: dict[tuple[int, int], float] = {}
        self.peak_rss_kb = 0
        self.samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)

    def start(self) -> TreeSampler:
        self.sample()
        with self._lock:
            self.base = {ident: ticks for ident, ticks in self.ticks.items()
                         if ident[0] != self.root}
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        rss_total = 0
        now = time.monotonic()
        with self._lock:
            own = process_tree(self.root)
            for pid in own + [p for root in self.also for p in process_tree(root)]:
                stat = _read_stat(pid)
                if stat is None:
                    continue
                ident = (pid, stat[1])
                if pid in own:
                    self.own.add(ident)
                self.ticks[ident] = max(self.ticks.get(ident, 0), stat[2])
                self.names[ident] = _comm(pid)  # latest: a launcher script may exec java
                if now - self.first_seen.setdefault(ident, now) < self.MIN_AGE:
                    continue
                rss, hwm = _read_rss_kb(pid)
                rss_total += rss
                self.hwm_kb[ident] = max(self.hwm_kb.get(ident, 0), hwm)
            self.peak_rss_kb = max(self.peak_rss_kb, rss_total)
            self.samples += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _cpu_ticks(self) -> int:
        return sum(t - self.base.get(ident, 0) for ident, t in self.ticks.items())

    def cpu_seconds(self) -> float:
        with self._lock:
            return self._cpu_ticks() / CLK_TCK

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "cpu_seconds": self._cpu_ticks() / CLK_TCK,
                "peak_rss_mb": self.peak_rss_kb / 1024,
                "sum_vmhwm_mb": sum(self.hwm_kb.values()) / 1024,
                "processes": [
                    {
                        "pid": pid,
                        "name": self.names.get((pid, start), "?"),
                        "cpu_seconds": round((self.ticks[(pid, start)]
                                              - self.base.get((pid, start), 0)) / CLK_TCK, 2),
                        "vmhwm_mb": round(self.hwm_kb.get((pid, start), 0) / 1024, 1),
                    }
                    for pid, start in sorted(self.ticks)
                ],
                "samples": self.samples,
            }

    def thread_groups(self) -> dict[str, int]:
        """CPU ticks so far of the tree's JIT compiler and GC threads."""
        with self._lock:
            pids = [pid for pid, _ in self.own]
        return thread_group_ticks(pids)

    def live_descendants(self) -> list[int]:
        """PIDs seen in the root's tree (other than the root) that still run with the same
        start."""
        with self._lock:
            idents = list(self.own)
        alive = []
        for pid, start in idents:
            if pid == self.root:
                continue
            stat = _read_stat(pid)
            if stat is not None and stat[1] == start:
                alive.append(pid)
        return alive


def process_cpu_ticks(pid: int | None) -> int:
    stat = _read_stat(pid) if pid else None
    return stat[2] if stat else 0


@dataclass
class MirrorResult:
    name: str
    records: int
    payload_bytes: int
    wall_seconds: float  # process start until all records are on the destination
    first_record_seconds: float  # process start until the first record arrived
    cpu_seconds: float  # process tree CPU (user + system) from start until done
    peak_rss_mb: float  # max over samples of the summed VmRSS of the tree
    sum_vmhwm_mb: float  # sum of each process's own peak RSS (an upper bound)
    cpu_seconds_at_first_record: float = 0.0  # startup cost
    # CPU s of the tree's JIT compiler and GC threads between the first and the last record
    jit_cpu_seconds_steady: float = 0.0
    gc_cpu_seconds_steady: float = 0.0
    destination_records: int = 0
    ready_seconds: float | None = None  # start until the mirror logged that it runs
    brokers_cpu_seconds: float = 0.0  # both brokers, same interval
    machine_busy_cpu_seconds: float = 0.0  # the whole machine, same interval
    loadavg_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    round: int = 1
    processes: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    config: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steady_seconds(self) -> float:
        return max(self.wall_seconds - self.first_record_seconds, 1e-9)

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_seconds

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.wall_seconds

    @property
    def steady_records_per_s(self) -> float:
        return self.records / self.steady_seconds

    @property
    def steady_mb_per_s(self) -> float:
        return self.payload_bytes / MB / self.steady_seconds

    @property
    def steady_cpu_per_gb(self) -> float:
        """CPU seconds per GB of key+value between the first and the last record."""
        return (self.cpu_seconds - self.cpu_seconds_at_first_record) / (self.payload_bytes / 1e9)

    @property
    def other_cpu_seconds(self) -> float:
        """CPU the rest of the machine (other work, not this benchmark) used meanwhile."""
        return max(0.0, self.machine_busy_cpu_seconds - self.cpu_seconds - self.brokers_cpu_seconds)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            records_per_s=self.records_per_s,
            mb_per_s=self.mb_per_s,
            steady_seconds=self.steady_seconds,
            steady_records_per_s=self.steady_records_per_s,
            steady_mb_per_s=self.steady_mb_per_s,
            other_cpu_seconds=self.other_cpu_seconds,
            steady_cpu_per_gb=self.steady_cpu_per_gb,
        )
        return data


def wait_for_records(
    admin: Any,
    topic: str,
    partitions: int,
    expected: int,
    started: float,
    alive: Callable[[], bool],
    timeout: float,
    label: str,
    log_path: Path,
    on_first: Callable[[], None],
    timeline: list[tuple[float, int]],
) -> tuple[float, float]:
    """Poll the destination's end offsets; (first record, all records) seconds after start.

    ``on_first`` runs when the first records show up; ``timeline`` gets (seconds, records)
    about once a second."""
    first: float | None = None
    last_report = time.monotonic()
    while True:
        now = time.monotonic()
        try:
            total = sum(end_offsets(admin, topic, partitions, timeout=5.0))
        except Exception:  # topic not created yet
            total = 0
        stamp = time.monotonic() - started
        if total > 0 and first is None:
            first = stamp
            on_first()
            print(f"  [{label}] first records after {stamp:.1f} s", flush=True)
        if not timeline or stamp - timeline[-1][0] >= 1.0 or total >= expected:
            timeline.append((round(stamp, 2), total))
        if total >= expected:
            return (first if first is not None else stamp), stamp
        if not alive():
            raise MirrorFailed(f"{label} exited early; last lines of {log_path}:\n{tail(log_path)}")
        if stamp > timeout:
            raise MirrorFailed(f"{label}: only {total}/{expected} records after {timeout:.0f} s")
        if now - last_report >= 10.0:
            last_report = now
            print(f"  [{label}] {stamp:6.1f} s: {total:,}/{expected:,} records", flush=True)
        time.sleep(POLL_INTERVAL)


def log_time(log_path: Path, marker: str, started_wall: float) -> float | None:
    """Seconds from ``started_wall`` to the first log line holding ``marker`` (log4j's
    ``[YYYY-mm-dd HH:MM:SS,mmm]`` or Python's ``YYYY-mm-dd HH:MM:SS,mmm`` at the line start)."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if marker in line:
            stamp = line.lstrip("[")[:23]
            try:
                when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            return when - started_wall
    return None


@dataclass
class Measurement:
    result: MirrorResult
    sampler: TreeSampler
    started_wall: float


def measure(
    label: str,
    start: Callable[[], int],
    alive: Callable[[], bool],
    log_path: Path,
    source: LocalKafkaCluster,
    destination: LocalKafkaCluster,
    workload: Workload,
    payload_bytes: int,
    timeout: float,
    on_started: Callable[[Measurement], None],
    also: Sequence[int] = (),
) -> MirrorResult:
    """Start a mirror, wait until every record is on the destination, account its resources.

    ``on_started`` receives the measurement as soon as the process runs (so that the caller
    can stop the whole tree even when waiting fails). The CPU and memory of the process trees
    ``also`` (a Spark cluster's workers) count as the mirror's, from its start on.
    """
    loadavg = os.getloadavg()
    with admin_client(destination) as admin:
        brokers_before = process_cpu_ticks(source.pid) + process_cpu_ticks(destination.pid)
        busy_before = machine_busy_ticks()
        started = time.monotonic()
        started_wall = time.time()
        root = start()
        sampler = TreeSampler(root, also=also).start()
        result = MirrorResult(label, workload.records, payload_bytes, 0.0, 0.0, 0.0, 0.0, 0.0)
        on_started(Measurement(result, sampler, started_wall))
        cpu_at_first: list[float] = []
        groups_at_first: list[dict[str, int]] = []

        def on_first() -> None:
            sampler.sample()
            cpu_at_first.append(sampler.cpu_seconds())
            groups_at_first.append(sampler.thread_groups())

        timeline: list[tuple[float, int]] = []
        try:
            first, done = wait_for_records(
                admin,
                TARGET_TOPIC,
                workload.partitions,
                workload.records,
                started,
                alive,
                timeout,
                label,
                log_path,
                on_first,
                timeline,
            )
            sampler.sample()
            groups_at_done = sampler.thread_groups()
        finally:
            sampler.stop()
        busy = (machine_busy_ticks() - busy_before) / CLK_TCK
        brokers = (
            process_cpu_ticks(source.pid) + process_cpu_ticks(destination.pid) - brokers_before
        ) / CLK_TCK
        snap = sampler.snapshot()
        result.wall_seconds = done
        result.first_record_seconds = first
        result.cpu_seconds = snap["cpu_seconds"]
        result.cpu_seconds_at_first_record = cpu_at_first[0] if cpu_at_first else 0.0
        if groups_at_first:
            result.jit_cpu_seconds_steady = (
                groups_at_done["jit"] - groups_at_first[0]["jit"]) / CLK_TCK
            result.gc_cpu_seconds_steady = (
                groups_at_done["gc"] - groups_at_first[0]["gc"]) / CLK_TCK
        result.timeline = timeline
        result.peak_rss_mb = snap["peak_rss_mb"]
        result.sum_vmhwm_mb = snap["sum_vmhwm_mb"]
        result.brokers_cpu_seconds = brokers
        result.machine_busy_cpu_seconds = busy
        result.loadavg_before = loadavg
        result.processes = snap["processes"]
        print(
            f"  [{label}] all {workload.records:,} records after {done:.1f} s (steady "
            f"{result.steady_records_per_s:,.0f} rec/s); CPU {result.cpu_seconds:.1f} s, "
            f"peak RSS {result.peak_rss_mb:,.0f} MB; other work on the machine used "
            f"{result.other_cpu_seconds:.0f} CPU s meanwhile",
            flush=True,
        )
        # Settled count: shows duplicates, if any.
        time.sleep(2.0)
        result.destination_records = sum(end_offsets(admin, TARGET_TOPIC, workload.partitions))
    return result
