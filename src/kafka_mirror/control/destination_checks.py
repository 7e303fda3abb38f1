"""Destination topic settings that would change or refuse mirrored records, found before records
flow: a broker-set timestamp (``LogAppendTime``) and a smaller record size limit."""

from __future__ import annotations

from dataclasses import dataclass

from kafka_mirror.control.topic_configs import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    MAX_MESSAGE_BYTES,
    TIMESTAMP_TYPE,
    TopicConfigs,
)


@dataclass(frozen=True)
class Misalignment:
    """One destination config that differs from what faithful mirroring needs."""

    key: str
    wanted: str  # the value that fixes it
    problem: str  # a sentence naming both topics


def misalignments(
    source_topic: str, target_topic: str, source: TopicConfigs, target: TopicConfigs
) -> list[Misalignment]:
    """What is wrong with an existing destination topic, given its source topic."""
    found = []
    if target.timestamp_type == LOG_APPEND_TIME:
        if source.timestamp_type == LOG_APPEND_TIME:
            why = (
                f"as has source topic '{source_topic}': the records' timestamps are the source "
                "broker's append times, and the destination broker replaces them with its own"
            )
        else:
            why = (
                "the destination broker overwrites every mirrored record's timestamp with its "
                f"own append time (source topic '{source_topic}' keeps the producers' "
                "timestamps)"
            )
        found.append(Misalignment(
            TIMESTAMP_TYPE, CREATE_TIME,
            f"destination topic '{target_topic}' has {TIMESTAMP_TYPE}={LOG_APPEND_TIME}, {why}",
        ))
    source_limit, target_limit = source.max_message_bytes, target.max_message_bytes
    if source_limit is not None and target_limit is not None and target_limit < source_limit:
        found.append(Misalignment(
            MAX_MESSAGE_BYTES, str(source_limit),
            f"destination topic '{target_topic}' accepts record batches up to {target_limit} "
            f"bytes ({MAX_MESSAGE_BYTES}), source topic '{source_topic}' up to {source_limit}: "
            "a larger record would stop the flow",
        ))
    return found


def remedy(problem: Misalignment) -> str:
    """What the user can do when the mirror does not fix it."""
    return f"set {problem.key}={problem.wanted} on it"
