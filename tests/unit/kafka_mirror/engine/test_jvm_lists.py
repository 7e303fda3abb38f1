"""Partitions and numbers for the JVM helpers as one string each (``io.kafkamirror.PartitionList``
parses them; its Java test reads the same forms)."""

from __future__ import annotations

from kafka_mirror.engine.jvm_admin import number_list, partition_list


def test_partitions_and_numbers_are_comma_separated_in_order() -> None:
    assert partition_list([("a", 0), ("b.c-d_e", 17), ("a", 1)]) == "a:0,b.c-d_e:17,a:1"
    assert number_list([1, 9_000_000_000]) == "1,9000000000"
    assert partition_list([]) == number_list([]) == ""
