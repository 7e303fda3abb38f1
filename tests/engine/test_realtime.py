"""Real-time mode's parts that need no cluster: the interceptor's ranges as copies, the task
slots a real-time flow holds, the session's master and the sink options of a run."""

from __future__ import annotations

import pytest

from kafka_mirror.clients import COPIES_RUN_CONFIG, spark_sink_options
from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.engine.realtime import new_run_key, parse_ranges, task_slots_needed
from kafka_mirror.engine.session import DEFAULT_SPARK_CONF, realtime_master
from kafka_mirror.errors import MirrorError
from kafka_mirror.offset_ranges import CopiedRange

FLOW = mm2_from_text("""
clusters = A, B
A.bootstrap.servers = a1:9092
B.bootstrap.servers = b1:9092
A->B.enabled = true
mirror.mode = realtime
""").flows[0]


def test_ranges_become_copies_of_the_source_partitions() -> None:
    text = ("A.orders\t1\t10\t13\t100\t103\t1\n"
            "A.orders\t1\t15\t40\t103\t110\t0\n"
            "A.other\t0\t0\t1\t0\t1\t1\n"  # not this run's topic: dropped
            "garbage\n")
    copies = parse_ranges(FLOW, {"orders": 2}, text)
    where = [(c.topic, c.partition, c.target_topic) for c in copies]
    assert where == [("orders", 1, "A.orders")] * 2
    assert copies[0].copied == CopiedRange(10, 13, 100, 103, True)
    assert copies[1].copied == CopiedRange(15, 40, 103, 110, False)


def test_a_realtime_flow_needs_a_task_slot_per_partition() -> None:
    task_slots_needed(FLOW, {"orders": 6, "audit": 2}, slots=10, taken=2)
    with pytest.raises(MirrorError, match=r"flow A->B: .* 8 partitions, 7 of 10 task slots free"
                       r".*spark\.master"):
        task_slots_needed(FLOW, {"orders": 6, "audit": 2}, slots=10, taken=3)


def test_the_default_local_master_gets_room_for_realtime_flows() -> None:
    conf = dict(DEFAULT_SPARK_CONF)
    assert realtime_master(conf, 4)["spark.master"] == "local[32]"
    assert realtime_master(conf, 40)["spark.master"] == "local[80]"
    assert realtime_master(conf | {"spark.master": "local[4]"}, 40)["spark.master"] == "local[4]"


def test_each_run_has_its_own_producer() -> None:
    first, second = new_run_key(FLOW), new_run_key(FLOW)
    assert first != second and first.startswith("A_to_B:")
    options = spark_sink_options(FLOW, copies_run=first)
    assert options[f"kafka.{COPIES_RUN_CONFIG}"] == first
    assert f"kafka.{COPIES_RUN_CONFIG}" not in spark_sink_options(FLOW)
