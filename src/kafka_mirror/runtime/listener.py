"""Spark's streaming progress events, routed to the flow they belong to."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from kafka_mirror.engine.batch_writer import BatchWriter, run_write_hooks
from kafka_mirror.engine.batches import BatchHook, event_from_progress, observed_row, run_hooks
from kafka_mirror.engine.flow_query import OBSERVATION
from kafka_mirror.runtime.flow import FlowRunner


class Listener:
    """Routes Spark's progress events to the batch hooks of the flow they belong to."""

    def __init__(self, runners: Mapping[str, FlowRunner], hooks: Sequence[BatchHook]) -> None:
        self.runners = runners
        self.hooks = hooks

    def progress(self, progress: Any) -> None:
        runner = self.runners.get(progress.name)
        if runner is None or not progress.sources:
            return
        writer = runner.writers.get(str(progress.runId))
        if runner.flow.realtime:
            # the drains report a real-time flow's progress; a batch end adds its count
            duration = float(getattr(progress, "batchDuration", 0) or 0) / 1000.0
            runner.drain_copies(writer, ended=(int(progress.batchId), duration))
            return
        row = observed_row(progress, OBSERVATION)
        records, size = int(row.get("records") or 0), int(row.get("bytes") or 0)
        written = (
            writer.completed(int(progress.batchId), records, size)
            if isinstance(writer, BatchWriter) else None
        )
        if written is not None:
            run_write_hooks(runner.hooks, written)
        event = event_from_progress(runner.flow, progress, written, row)
        run_hooks(self.hooks, event)


# Rates Spark leaves out of a progress event's JSON when they are not finite (NaN, infinity);
# PySpark's SourceProgress.fromJson requires them. Read as NaN, as the JVM's object holds them.
_SOURCE_RATES = ("inputRowsPerSecond", "processedRowsPerSecond")


def progress_from_json(text: str) -> Any:
    """A progress event's ``StreamingQueryProgress.json`` as PySpark's ``StreamingQueryProgress``
    (the fields the listener reads are the same as PySpark's own conversion gives)."""
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    data = json.loads(text)
    for source in data.get("sources") or ():
        for key in _SOURCE_RATES:
            source.setdefault(key, math.nan)
    return StreamingQueryProgress.fromJson(data)


def spark_listener(listener: Listener) -> Any:
    """``listener`` as a PySpark ``StreamingQueryListener``.

    Each progress event crosses from the JVM as one JSON text (two Py4J calls). PySpark's own
    listener bridge converts the event field by field, tens of Py4J calls each resolved by
    reflection on Spark's listener thread: with one micro-batch a second (a flow's heartbeats)
    that cost an idle mirror about a quarter of a core."""
    from pyspark.sql.streaming.listener import (
        JStreamingQueryListener,
        QueryProgressEvent,
        StreamingQueryListener,
    )

    class JsonBridge(JStreamingQueryListener):
        def onQueryProgress(self, jevent: Any) -> None:
            progress = progress_from_json(jevent.progress().json())
            self.pylistener.onQueryProgress(QueryProgressEvent(progress=progress))

    class SparkListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            listener.progress(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

        @property
        def _jlistener(self) -> Any:
            # StreamingQueryListener._jlistener, with the bridge above
            from pyspark import SparkContext

            if not hasattr(self, "_jlistenerobj"):
                jvm = SparkContext._jvm
                assert jvm is not None
                self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(JsonBridge(self))
            return self._jlistenerobj

    return SparkListener()
