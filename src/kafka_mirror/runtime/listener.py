"""Spark's streaming progress events, routed to the flow they belong to."""

from __future__ import annotations

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


def spark_listener(listener: Listener) -> Any:
    """``listener`` as a PySpark ``StreamingQueryListener``."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class SparkListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            listener.progress(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return SparkListener()
