"""Which mode a flow runs in once the Spark master is known (kafka_mirror.config.modes)."""

from __future__ import annotations

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.modes import fit_modes, local_slots

THREE_FLOWS = ("clusters = A, B, C\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
               "C.bootstrap.servers = c:1\nA->B.enabled = true\nA->C.enabled = true\n"
               "B->C.enabled = true\n")


@pytest.mark.parametrize(("master", "slots"), [
    ("local", 1), ("local[3]", 3), (" local[2,4] ", 2), ("local[*]", 32), ("local[*,2]", 32),
    ("local-cluster[2,1,1024]", None), ("spark://h:7077", None), ("yarn", None),
    ("local[x]", None),
])
def test_local_slots(master: str, slots: int | None) -> None:
    assert local_slots(master) == slots


def _modes(text: str, cli: dict[str, str] | None = None) -> dict[str, str]:
    return {flow.name: flow.mode for flow in fit_modes(mm2_from_text(text), cli).flows}


def test_flows_a_local_master_has_no_slot_for_run_micro_batches_naming_the_master() -> None:
    config = fit_modes(mm2_from_text(THREE_FLOWS + "spark.master = local[2]\n"))
    modes = {flow.name: (flow.mode, flow.mode_reason) for flow in config.flows}
    # the flows moved to micro-batch mode need a slot for their batches' tasks too
    why = "spark.master local[2] has 2 task slots for 3 real-time flows"
    assert modes == {"A->B": ("realtime", "the default"), "A->C": ("micro-batch", why),
                     "B->C": ("micro-batch", why)}
    assert config.notices[-1] == (f"{why}: A->C, B->C run in micro-batch mode (set mirror.mode, "
                                  "or give Spark a task slot per real-time flow)")
    # room for every flow: nothing moves
    assert set(_modes(THREE_FLOWS + "spark.master = local[3]\n").values()) == {"realtime"}
    # a micro-batch flow of its own keeps a slot from the real-time flows
    mixed = THREE_FLOWS + "A->B.mirror.mode = micro-batch\n"
    assert _modes(mixed + "spark.master = local[3]\n") == {
        "A->B": "micro-batch", "A->C": "realtime", "B->C": "realtime"}
    assert _modes(mixed + "spark.master = local[2]\n") == {
        "A->B": "micro-batch", "A->C": "realtime", "B->C": "micro-batch"}


def test_a_set_mode_is_kept_and_the_command_line_master_wins() -> None:
    # B->C asked for real-time mode: the default-mode flows make room
    text = THREE_FLOWS + "B->C.mirror.mode = realtime\n"
    assert _modes(text, {"spark.master": "local[1]"}) == {
        "A->B": "micro-batch", "A->C": "micro-batch", "B->C": "realtime"}
    assert _modes(text + "spark.master = local[1]\n", {"spark.master": "local[*]"}) == {
        "A->B": "realtime", "A->C": "realtime", "B->C": "realtime"}
    # every flow set: nothing moves (the flow without a slot fails at its start, naming the master)
    explicit = THREE_FLOWS + "mirror.mode = realtime\nspark.master = local[1]\n"
    assert fit_modes(mm2_from_text(explicit)).notices == mm2_from_text(explicit).notices
    # a cluster's slots are not known before its session runs
    assert set(_modes(THREE_FLOWS, {"spark.master": "spark://h:7077"}).values()) == {"realtime"}
