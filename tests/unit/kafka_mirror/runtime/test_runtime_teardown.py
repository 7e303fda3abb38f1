"""The mirror process's teardown: stages closed in a fixed order whatever order their resources
started in; a resource that fails to close does not keep the others open; and a wiring failure
part-way through ``Mirror.run`` closes everything started so far (fakes stand for the
resources)."""

from __future__ import annotations

import logging
import threading
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import kafka_mirror.runtime.mirror as mirror_module
from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec, HeartbeatSpec
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.observability.null_metrics import Metrics
from kafka_mirror.runtime.mirror import Mirror
from kafka_mirror.runtime.teardown import STOP_BUDGET_SECONDS, StopBudget, Teardown

CONFIG = """clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
B->A.enabled = true
mirror.metrics.port = 9999
"""


def test_stages_close_in_their_order_whatever_order_things_started() -> None:
    closed: list[str] = []
    with ExitStack() as stack:
        teardown = Teardown.on(stack)
        teardown.spark.add("spark", lambda: closed.append("spark"))
        teardown.tasks.add("task 1", lambda: closed.append("task 1"))
        teardown.server.add("server", lambda: closed.append("server"))
        teardown.flows.add("flows", lambda: closed.append("flows"))
        teardown.tasks.add("task 2", lambda: closed.append("task 2"))
        teardown.lag.add("lag", lambda: closed.append("lag"))
    assert closed == ["flows", "task 1", "task 2", "lag", "spark", "server"]


def test_a_failure_to_close_is_a_warning_and_the_rest_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[str] = []

    def broken() -> None:
        raise RuntimeError("broker gone\nat some.java.Frame")

    def broken_in_java() -> None:  # py4j's first line names only the call
        raise RuntimeError("An error occurred while calling o81.close.\n"
                           ": org.apache.kafka.common.errors.TimeoutException: Timed out\n"
                           "\tat org.apache.kafka.Frame")

    with caplog.at_level(logging.WARNING), ExitStack() as stack:
        teardown = Teardown.on(stack)
        teardown.emitters.add("A heartbeats", broken)
        teardown.emitters.add("B heartbeats", lambda: closed.append("B heartbeats"))
        teardown.flow_state.add("A offset syncs", broken_in_java)
        teardown.spark.add("spark", lambda: closed.append("spark"))
    assert closed == ["B heartbeats", "spark"]
    assert [r.getMessage() for r in caplog.records] == [
        "A heartbeats not closed: broker gone",
        "A offset syncs not closed: org.apache.kafka.common.errors.TimeoutException: Timed out"]
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert all(r.exc_info is None for r in caplog.records)  # no stack trace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_closers_that_wait_on_a_cluster_share_one_budget() -> None:
    # both clusters gone: each closer would wait its own timeout in turn (91 s in all, measured)
    clock = Clock()
    given: list[tuple[str, float]] = []

    def waits(what: str, seconds: float, timeout: float) -> None:
        given.append((what, timeout))
        clock.now += min(seconds, timeout)

    with ExitStack() as stack:
        teardown = Teardown.on(stack, StopBudget(30.0, clock))
        teardown.flows.add("flow", lambda: waits("flow", 5.0, 99.0))  # its own grace, not counted
        teardown.handover.add_waiting("kept positions", partial(waits, "kept positions", 25.0))
        teardown.emitters.add_waiting("A heartbeats", partial(waits, "A heartbeats", 10.0))
        teardown.emitters.add_waiting("B heartbeats", partial(waits, "B heartbeats", 10.0))
        teardown.lag.add_waiting("lag commits", partial(waits, "lag commits", 10.0))
    assert given == [("flow", 99.0), ("kept positions", 30.0), ("A heartbeats", 5.0),
                     ("B heartbeats", 0.0), ("lag commits", 0.0)]
    assert clock.now == 100.0 + 5.0 + 30.0


def test_a_quick_stop_leaves_every_closer_the_whole_budget_but_what_was_spent() -> None:
    clock = Clock()
    given: list[float] = []
    with ExitStack() as stack:
        teardown = Teardown.on(stack, StopBudget(30.0, clock))
        for name in ("kept positions", "heartbeats", "checkpoints"):
            teardown.tasks.add_waiting(name, given.append)
    assert given == [30.0, 30.0, 30.0]


class Log:
    """What the fakes did, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def __call__(self, event: str) -> None:
        self.events.append(event)


class FakeSession:
    log: Log

    def __init__(self, conf: dict[str, str], launch: object = None) -> None:
        self.log("session starting")

    def discard(self) -> None:
        self.log("session discarded")

    def session(self) -> Any:
        raise AssertionError("wiring failed before the session was used")


class FakeClassData:
    log: Log

    def __init__(self, directory: Path) -> None:
        pass

    def spark_conf(self, conf: dict[str, str]) -> dict[str, str]:
        return conf

    def driver_launch(self) -> None:
        return None

    def stop(self) -> None:
        self.log("class data stopped")


class FakeOffsetSyncs:
    def __init__(self, log: Log, name: str) -> None:
        self.log, self.name = log, name

    def close(self, timeout: float) -> None:
        assert 0 < timeout <= STOP_BUDGET_SECONDS  # the stop's budget, nearly all of it left
        self.log(f"{self.name} offset syncs closed")


class FakeRunner:
    log: Log

    def __init__(self, flow: FlowSpec, state_root: Path, admins: Any, raw: Any,
                 metrics: Metrics, with_latency: bool) -> None:
        self.flow = flow
        self.offset_syncs = FakeOffsetSyncs(self.log, flow.name)
        self.target_offsets = None
        self.failed = None
        self.kept = None
        self.lease = None

    def save_ranges(self) -> None:
        self.log(f"{self.flow.name} ranges saved")

    def close_unclean(self, timeout: float) -> None:
        """Never opened here (no query started)."""

    def sync_topics(self) -> dict[str, int]:
        if self.flow.name == "B->A":
            raise RuntimeError("topic sync failed")
        return {"t": 1}


class FakeControl:
    log: Log

    def __init__(self, admins: Any, heartbeats: tuple[HeartbeatSpec, ...], metrics: Metrics,
                 teardown: Teardown) -> None:
        self.teardown = teardown

    def assemble(self, runners: dict[str, FakeRunner]) -> list[Any]:
        for name in runners:
            self.teardown.tasks.add(f"{name} task", partial(self.log, f"{name} task stopped"))
            self.teardown.checkpointers.add(
                f"{name} checkpoints", partial(self.log, f"{name} checkpointer closed"))
        self.teardown.emitters.add("heartbeats", self._broken)
        return []

    def _broken(self) -> None:
        self.log("emitter close failed")
        raise RuntimeError("emitter already closed")


class FakeServer:
    log: Log

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def start(self) -> FakeServer:
        self.log("server started")
        return self

    def stop(self) -> None:
        self.log("server stopped")


class Unconnected(Mirror):
    def connect(self) -> dict[str, ClusterAdmin]:
        return {}


def test_a_wiring_failure_part_way_closes_everything_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = Log()
    fakes = {"SessionStart": FakeSession, "ClassData": FakeClassData, "FlowRunner": FakeRunner,
             "ControlPlane": FakeControl, "MetricsServer": FakeServer}
    for name, fake in fakes.items():
        monkeypatch.setattr(fake, "log", log, raising=False)
        monkeypatch.setattr(mirror_module, name, fake)
    monkeypatch.setattr(mirror_module, "spark_conf", lambda *a, **k: {})
    monkeypatch.setattr(mirror_module, "connector_jars", lambda jars_dir: [])
    monkeypatch.setattr(mirror_module, "wait_for_master", lambda conf, timeout: None)
    config = mm2_from_text(CONFIG)
    assert [f.name for f in config.flows] == ["A->B", "B->A"]
    with pytest.raises(RuntimeError, match="topic sync failed"):
        Unconnected(config, tmp_path).run(threading.Event())
    assert log.events == [
        "server started",
        "session starting",
        "A_to_B task stopped", "B_to_A task stopped",
        "A_to_B checkpointer closed", "B_to_A checkpointer closed",
        "emitter close failed",
        "A->B ranges saved", "A->B offset syncs closed",
        "B->A ranges saved", "B->A offset syncs closed",
        "class data stopped",
        "session discarded",
        "server stopped",
    ]
