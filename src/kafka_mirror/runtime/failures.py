"""A flow's failures told apart: the kind reported to the metrics, the errors no restart cures,
and the records of the batch the target refused."""

from __future__ import annotations

import re
from pathlib import Path

from kafka_mirror.config.model import FlowSpec
from kafka_mirror.engine.positions import batch_end_positions, batch_start_positions
from kafka_mirror.errors import first_line

# Errors a restart cannot cure: the target refuses a record for good.
PERMANENT_FAILURES = (
    "RecordTooLargeException",
    "InvalidTimestampException",
    "InvalidRecordException",
    "TopicAuthorizationException",
    "CorruptRecordException",
)


# a line naming a JVM exception and its message (``Caused by: a.b.CException: ...`` or, in
# py4j's report, ``: a.b.CException: ...``)
_JVM_EXCEPTION = re.compile(
    r"^(?:Caused by: |: )?((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): .*)$")
_WRAPPERS = ("py4j.", "org.apache.spark.sql.execution.streaming.sources.ForeachBatchUserFunc")


def query_error_line(error: str) -> str:
    """One line for a failed query's error: its first line, unless that is only py4j's word
    that the batch function raised (``An exception was raised by the Python Proxy``); then the
    first JVM exception under it that is not a wrapper (for example Spark's ``Job aborted due to
    stage failure: ... most recent failure: ...``)."""
    head = first_line(error)
    if "Python Proxy" not in head:
        return head
    for line in error.splitlines():
        found = _JVM_EXCEPTION.match(line.strip())
        if found and not found.group(1).startswith(_WRAPPERS):
            return found.group(1)[:500]
    return head


def failure_reason(error: str, exception: str) -> str:
    """``exception`` and its message, from the line of ``error`` (a Java trace) naming it."""
    for line in error.splitlines():
        at = line.find(exception)
        if at >= 0:
            return line[at:].strip()[:300]
    return first_line(error)


def permanent_failure(error: str) -> str | None:
    """The exception in ``error`` that a restart cannot cure; None when a retry may."""
    return next((p for p in PERMANENT_FAILURES if p in error), None)


def error_kind(error: str) -> str:
    """The kind of a flow's failure, for ``kafka_mirror_errors_total``."""
    lowered = error.lower()
    if "authoriz" in lowered or "authenticat" in lowered or "sasl" in lowered:
        return "authorization"
    if any(p in error for p in PERMANENT_FAILURES):
        return "record_rejected"
    if any(w in lowered for w in ("timeout", "disconnect", "connection", "unreachable",
                                  "not usable", "network")):
        return "unreachable"
    return "other"


def refused_batch(flow: FlowSpec, checkpoint: Path) -> str | None:
    """Which records the batch that failed held (the newest batch Spark planned but did not
    commit), as source and target partitions with offsets; None when unknown."""
    planned = sorted(int(p.name) for p in (checkpoint / "offsets").glob("*") if p.name.isdigit())
    committed = {p.name for p in (checkpoint / "commits").glob("*")}
    pending = [b for b in planned if str(b) not in committed]
    if not pending:
        return None
    batch = pending[-1]
    try:
        start = batch_start_positions(checkpoint, batch) or {}
        end = batch_end_positions(checkpoint, batch) or {}
    except (OSError, ValueError):
        return None
    moved = [
        f"{topic}[{partition}] offsets {start.get((topic, partition), offset)}.."
        f"{offset - 1} -> {flow.target_topic(topic)}[{partition}]"
        for (topic, partition), offset in sorted(end.items())
        if offset > start.get((topic, partition), offset)
    ]
    if not moved:
        return None
    shown = ", ".join(moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
    return f"cluster '{flow.target.alias}' refused batch {batch} ({shown})"


def failed_for_good(flow: FlowSpec, error: str, permanent: str, checkpoint: Path | None) -> str:
    """Why a flow stopped for good: the first line names the refused records (when known) and
    the target's reason; Spark's whole text follows."""
    refused = refused_batch(flow, checkpoint) if checkpoint is not None else None
    reason = failure_reason(error, permanent)
    return f"{refused}: {reason}\n{error}" if refused else f"{reason}\n{error}"
