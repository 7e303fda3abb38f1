"""Progress events read from Spark's JSON (runtime/listener.py): the fields the engine reads
come out as PySpark's field-by-field conversion gives them, and rates Spark leaves out of its
JSON (NaN, infinity) do not break the event."""

from __future__ import annotations

import json
import math
import uuid

from kafka_mirror.engine.batches import observed_row, parse_offsets
from kafka_mirror.runtime.listener import progress_from_json


def _progress(**source_extra: object) -> dict[str, object]:
    source = {
        "description": "KafkaV2[Assign[t-0, t-1]]",
        "startOffset": None,
        "endOffset": {"t": {"0": 5, "1": 7}},
        "latestOffset": {"t": {"0": 5, "1": 9}},
        "numInputRows": 12,
        "metrics": {"avgOffsetsBehindLatest": "1.0"},
        **source_extra,
    }
    return {
        "id": str(uuid.uuid4()),
        "runId": str(uuid.uuid4()),
        "name": "a_to_b",
        "timestamp": "2026-11-26T20:00:00.000Z",
        "batchId": 3,
        "batchDuration": 250,
        "numInputRows": 12,
        "durationMs": {"addBatch": 200, "latestOffset": 5},
        "stateOperators": [],
        "sources": [source],
        "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
        "observedMetrics": {"kafka_mirror": {"records": 12, "bytes": 345}},
    }


def test_fields_the_listener_reads() -> None:
    text = json.dumps(_progress(inputRowsPerSecond=4.0, processedRowsPerSecond=48.0))
    progress = progress_from_json(text)
    assert progress.name == "a_to_b"
    assert isinstance(progress.runId, uuid.UUID)
    assert progress.batchId == 3 and progress.batchDuration == 250
    assert dict(progress.durationMs) == {"addBatch": 200, "latestOffset": 5}
    source = progress.sources[0]
    assert parse_offsets(source.startOffset) == {}
    assert parse_offsets(source.endOffset) == {("t", 0): 5, ("t", 1): 7}
    assert parse_offsets(source.latestOffset) == {("t", 0): 5, ("t", 1): 9}
    assert source.inputRowsPerSecond == 4.0
    assert observed_row(progress, "kafka_mirror") == {"records": 12, "bytes": 345}
    assert observed_row(progress, "other") == {}


def test_rates_left_out_of_the_json_read_as_nan() -> None:
    """Spark writes no NaN or infinite rate into its JSON; the JVM's object (what PySpark's own
    conversion reads) holds NaN there."""
    progress = progress_from_json(json.dumps(_progress()))
    assert math.isnan(progress.sources[0].inputRowsPerSecond)
    assert math.isnan(progress.sources[0].processedRowsPerSecond)
    assert math.isnan(progress.inputRowsPerSecond)
