"""Stock MirrorMaker 2's source positions as records (:mod:`kafka_mirror.control.mm2_positions`):
keys byte-identical to Kafka's JsonConverter, values, and the names of MM2's offsets topic and
worker group. (Against real clusters and stock MM2: tests/engine/test_mm2_positions.py.)"""

from __future__ import annotations

import pytest

from kafka_mirror.control.mm2_positions import (
    mm2_offsets_topic,
    mm2_source_key,
    mm2_source_value,
    mm2_worker_group,
)
from kafka_mirror.errors import ConfigError

# Computed with Kafka 4.3.1's jars (jvm/kafka-dist/target/lib): the key is
# JsonConverter(schemas.enable=false, isKey=true).fromConnectData(t, null,
# List.of("MirrorSourceConnector", <HashMap put topic, partition, cluster as in
# MirrorUtils.wrapPartition>)).
JAVA_KEY_SRC_TXYZ_7 = (
    b'["MirrorSourceConnector",{"cluster":"src","partition":7,"topic":"t.x-y_z"}]'
)
JAVA_ODD_ALIAS = "q\"b\\s/\u0001\t\n\r\b\f\u001f\u007f\u00e9\u20ac\U0001f600\u2028"
JAVA_KEY_ODD_ALIAS_HEX = (
    "5b224d6972726f72536f75726365436f6e6e6563746f72222c7b22636c7573746572223a22715c22625c5c"
    "732f5c75303030315c745c6e5c725c625c665c75303031467fc3a9e282ac5c75443833445c7544453030e2"
    "80a8222c22706172746974696f6e223a323134373438333634372c22746f706963223a226f7264657273227d5d"
)


def test_source_key_is_byte_identical_to_kafka_json_converter() -> None:
    assert mm2_source_key("A", "orders", 0) == (
        b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]'
    )
    assert mm2_source_key("src", "t.x-y_z", 7) == JAVA_KEY_SRC_TXYZ_7
    # Jackson's escaping: short escapes, \u00XX upper case, non-BMP as escaped surrogates,
    # DEL / non-ASCII / U+2028 raw UTF-8
    assert mm2_source_key(JAVA_ODD_ALIAS, "orders", 2**31 - 1).hex() == JAVA_KEY_ODD_ALIAS_HEX
    with pytest.raises(ValueError):
        mm2_source_key("A", "orders", -1)
    with pytest.raises(ValueError):
        mm2_source_key("A", "orders", 2**31)


def test_source_value_is_last_copied_offset() -> None:
    assert mm2_source_value(42) == b'{"offset":41}'
    assert mm2_source_value(1) == b'{"offset":0}'
    with pytest.raises(ValueError):
        mm2_source_value(0)


def test_offsets_topic_name_precedence() -> None:
    assert mm2_offsets_topic({}, "A", "B") == "mm2-offsets.A.internal"
    props = {"B.offset.storage.topic": "b-offsets", "A->B.offset.storage.topic": "ignored"}
    assert mm2_offsets_topic(props, "A", "B") == "b-offsets"
    assert mm2_offsets_topic(props, "B", "A") == "mm2-offsets.B.internal"
    # top-level beats <target>. and applies to every pair
    props["offset.storage.topic"] = " all-offsets "
    assert mm2_offsets_topic(props, "A", "B") == "all-offsets"
    assert mm2_offsets_topic(props, "B", "A") == "all-offsets"
    with pytest.raises(ConfigError, match=r"B\.offset\.storage\.topic"):
        mm2_offsets_topic({"B.offset.storage.topic": " "}, "A", "B")


def test_worker_group_name() -> None:
    assert mm2_worker_group({}, "A", "B") == "A-mm2"
    assert mm2_worker_group({"group.id": "no", "B.group.id": "g"}, "A", "B") == "g"
