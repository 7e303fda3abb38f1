"""A standby's control plane stays idle: checkpoints, group offset sync, ACL sync and the pair's
heartbeats run only while this instance writes one of the flows; checkpoints and group offset
sync, besides, only once its offset translation is the flow's (after a takeover: the previous
writer's copies read in)."""

from __future__ import annotations

from typing import Any

from kafka_mirror.runtime.control_plane import _when_active, _when_translating


class Runner:
    def __init__(self, active: bool, translates: bool = False) -> None:
        self.active = active
        self.translates = translates


def test_tasks_run_only_while_a_flow_is_written_here() -> None:
    ran: list[str] = []
    writer, standby = Runner(True), Runner(False)
    pair: list[Any] = [standby, writer]
    _when_active(pair, lambda: ran.append("heartbeat"))()
    _when_active([standby], lambda: ran.append("checkpoints"))()
    assert ran == ["heartbeat"]
    writer.active = False  # the lease went to another instance
    _when_active(pair, lambda: ran.append("heartbeat"))()
    assert ran == ["heartbeat"]


def test_checkpoints_wait_for_the_flows_translation() -> None:
    ran: list[str] = []
    runner: Any = Runner(True)  # took the lease; its query not started yet
    _when_translating(runner, lambda: ran.append("checkpoints"))()
    assert ran == []
    runner.translates = True
    _when_translating(runner, lambda: ran.append("checkpoints"))()
    assert ran == ["checkpoints"]
