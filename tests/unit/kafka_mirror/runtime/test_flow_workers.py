"""Each flow's upkeep on its own thread (:mod:`kafka_mirror.runtime.flow_workers`): a flow
restarting its query for minutes holds neither another flow nor the main loop; the main loop
reports the mirror live until a flow's upkeep is past its window; a failing first start ends the
process; a stop lets the upkeep under way end and starts no more."""

from __future__ import annotations

import threading
import time

import pytest

from kafka_mirror.runtime.flow_workers import FlowWorker, FlowWorkers
from kafka_mirror_testing.waiting import wait_for


class FakeFlow:
    """A flow whose tick blocks while ``hold`` is clear (a restart under way when
    ``restarting``)."""

    def __init__(self, blocks: bool = False, restarting: bool = False) -> None:
        self.ticks = 0
        self.started = threading.Event()
        self.hold = threading.Event()
        if not blocks:
            self.hold.set()
        self.restarting = restarting
        self.ticking = threading.Event()

    def first(self) -> None:
        self.started.set()

    def tick(self) -> None:
        self.ticking.set()
        self.hold.wait(30)
        self.ticks += 1

    def worker(self, name: str) -> FlowWorker:
        return FlowWorker(name, self.first, self.tick, lambda: self.restarting)


def _poking(workers: FlowWorkers, stop: threading.Event) -> threading.Thread:
    def loop() -> None:
        while not stop.wait(0.01):
            workers.poke()
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_flow_restarting_holds_neither_the_other_flows_nor_the_main_loop() -> None:
    slow, quick = FakeFlow(blocks=True, restarting=True), FakeFlow()
    workers = FlowWorkers({"slow": slow.worker("slow"), "quick": quick.worker("quick")},
                          busy_window=30.0, restart_window=600.0).start()
    stop = threading.Event()
    poker = _poking(workers, stop)
    try:
        assert slow.started.wait(10) and quick.started.wait(10)
        assert slow.ticking.wait(10)
        # the slow flow's restart is under way; the other flow goes on ticking
        wait_for(lambda: quick.ticks >= 20, 10, "the other flow ticking")
        assert slow.ticks == 0
        assert workers.healthy()
        slow.hold.set()
        wait_for(lambda: slow.ticks >= 2, 10, "the slow flow ticking again")
    finally:
        stop.set()
        poker.join(5)
        slow.hold.set()
        workers.close(10)


@pytest.mark.parametrize("restarting", [False, True])
def test_an_upkeep_past_its_window_makes_the_mirror_not_live(
        restarting: bool, caplog: pytest.LogCaptureFixture) -> None:
    """A tick past the busy window (a call stuck), or a restart past the restart window, stops
    the beats that keep the mirror live, with one warning naming the flow; a restart within its
    window does not."""
    stuck = FakeFlow(blocks=True, restarting=restarting)
    worker = stuck.worker("stuck")
    workers = FlowWorkers({"stuck": worker}, busy_window=30.0, restart_window=600.0).start()
    try:
        assert stuck.started.wait(10)
        wait_for(lambda: worker.busy_since is None, 10, "the first start's end")
        workers.poke()
        assert stuck.ticking.wait(10)
        began = worker.busy_since
        assert began is not None
        assert workers.healthy(began + 29)
        assert workers.healthy(began + 31) is restarting
        assert workers.healthy(began + 601) is False
        assert workers.healthy(began + 700) is False
        warnings = [r.getMessage() for r in caplog.records if "has taken" in r.getMessage()]
        assert len(warnings) == 1 and warnings[0].startswith("flow stuck: its upkeep")
    finally:
        stuck.hold.set()
        workers.close(10)
    wait_for(lambda: worker.busy_since is None, 10, "the tick's end")
    assert workers.healthy()


def test_a_failing_first_start_is_raised_by_the_main_loop() -> None:
    def first() -> None:
        raise RuntimeError("no such option")

    worker = FlowWorker("bad", first, lambda: None, lambda: False)
    workers = FlowWorkers({"bad": worker}, busy_window=30.0, restart_window=600.0).start()
    wait_for(lambda: worker.error is not None, 10, "the first start's failure")
    with pytest.raises(RuntimeError, match="no such option"):
        workers.poke()
    workers.close(5)


def test_a_stop_waits_for_the_upkeep_under_way_and_starts_no_more() -> None:
    flow = FakeFlow(blocks=True)
    worker = flow.worker("f")
    workers = FlowWorkers({"f": worker}, busy_window=30.0, restart_window=600.0).start()
    assert flow.started.wait(10)
    wait_for(lambda: worker.busy_since is None, 10, "the first start's end")
    workers.poke()
    assert flow.ticking.wait(10)
    threading.Timer(0.3, flow.hold.set).start()
    began = time.monotonic()
    workers.close(10)
    assert flow.ticks == 1 and time.monotonic() - began < 10
    assert worker.join(0)
    workers.poke()  # after the stop: nothing runs
    assert flow.ticks == 1
