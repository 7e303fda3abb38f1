"""Source positions a flow has committed, read from its Spark checkpoints.

Each (re)start of a flow's query gets a fresh checkpoint directory (a *generation*) seeded with
the positions of the newest generation that committed a batch. A change of topics or
partitions therefore never meets Spark's rules about changed sources, and a crash replays at
most the batch that was in flight. A generation also records the topic ID of each source topic
it mirrors: positions of a topic deleted and created again under the same name (a new ID) are
never applied to the new topic.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from kafka_mirror.errors import MirrorError
from kafka_mirror.state.files import read_json, write_json

Positions = dict[tuple[str, int], int]
_PREFIX = "gen-"
_TOPIC_IDS = "topic-ids.json"


def _generations(flow_dir: Path) -> list[tuple[int, Path]]:
    if not flow_dir.is_dir():
        return []
    gens = []
    for child in flow_dir.iterdir():
        if child.name.startswith(_PREFIX) and child.name[len(_PREFIX) :].isdigit():
            gens.append((int(child.name[len(_PREFIX) :]), child))
    return sorted(gens)


def _batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _positions(parsed: dict[str, dict[str, int]]) -> Positions:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in parsed.items()
        for partition, offset in partitions.items()
    }


def batch_end_positions(checkpoint: Path, batch_id: int) -> Positions | None:
    """End offsets of batch ``batch_id`` from Spark's offset log (written before it runs)."""
    offsets_file = checkpoint / "offsets" / str(batch_id)
    if not offsets_file.is_file():
        return None
    lines = offsets_file.read_text(encoding="utf-8").splitlines()
    # line 1: version; line 2: batch metadata; then one line of offsets per source
    source_lines = [ln for ln in lines[2:] if ln.strip().startswith("{")]
    if not source_lines:
        return None
    return _positions(json.loads(source_lines[0]))


def initial_positions(checkpoint: Path) -> Positions | None:
    """Where the Kafka source of this checkpoint started, as Spark resolved it."""
    path = checkpoint / "sources" / "0" / "0"
    if not path.is_file():
        return None
    text = path.read_bytes().lstrip(b"\0").decode("utf-8")
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("{")]
    return _positions(json.loads(lines[0])) if lines else None


def batch_start_positions(checkpoint: Path, batch_id: int) -> Positions | None:
    """Start offsets of batch ``batch_id``: the previous batch's end, or the initial ones."""
    if batch_id > 0:
        previous = batch_end_positions(checkpoint, batch_id - 1)
        if previous is not None:
            return previous
    return initial_positions(checkpoint)


def committed_positions(checkpoint: Path) -> Positions | None:
    """End offsets of the last batch whose commit Spark recorded, or None."""
    commits = _batch_ids(checkpoint / "commits")
    if not commits:
        return None
    return batch_end_positions(checkpoint, commits[-1])


def topic_ids(checkpoint: Path) -> dict[str, str]:
    """The source topic IDs a generation mirrored (empty for generations that predate them)."""
    return read_json(checkpoint / _TOPIC_IDS,
                     lambda ids: {str(k): str(v) for k, v in ids.items()},
                     "the source topics' IDs are not known for that generation (a topic "
                     "re-created meanwhile is not told apart)") or {}


def recreated_topics(
    known: Mapping[str, str], current: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """Topics whose ID changed (deleted and created again): topic -> (old ID, new ID). A topic
    whose old or new ID is unknown is not called re-created."""
    return {
        topic: (old, current[topic])
        for topic, old in sorted(known.items())
        if topic in current and current[topic] != old
    }


class TopicIdsUnknown(MirrorError):
    """A query run cannot start yet: the IDs of its source topics are not known."""


def ids_to_record(
    topics: Iterable[str], ids: Mapping[str, str] | None, read_error: str | None,
    remembered: Mapping[str, str],
) -> dict[str, str]:
    """The source topic IDs a new generation records: those of ``topics`` (the ones it
    mirrors) from the last read of them, ``ids`` (None when the cluster has no topic IDs:
    brokers before Kafka 2.8) or the reason that read failed; and the ``remembered`` IDs of
    topics no longer mirrored (a topic deleted is gone from the next generation, and when one
    of its name comes back, that it is a new topic is only known from its old ID).

    A generation never starts blind: positions applied to a topic deleted and created again
    under the same name would skip or misplace its records. So when the IDs were not read, or
    a topic was not found (deleted between the listing and the read), this raises and the start
    waits for the next attempt."""
    wanted = set(topics)
    if read_error is not None:
        raise TopicIdsUnknown(
            f"source topic IDs not read ({read_error}); not starting before they are known")
    if ids is None:
        return {}
    missing = sorted(wanted - set(ids))
    if missing:
        raise TopicIdsUnknown(
            f"source topic {', '.join(missing)} not found when its query was to start (deleted "
            f"meanwhile?); not starting before its topic ID is known")
    kept = {topic: old for topic, old in remembered.items() if topic not in wanted}
    return dict(sorted({**kept, **{topic: ids[topic] for topic in wanted}}.items()))


class FlowState:
    """The checkpoint generations of one flow under the state directory."""

    def __init__(self, flow_dir: Path) -> None:
        self.flow_dir = flow_dir

    def last_committed(self) -> tuple[Positions, dict[str, str]] | None:
        """The positions of the newest generation that committed a batch, with the topic IDs
        that generation mirrored."""
        for _, gen in reversed(_generations(self.flow_dir)):
            positions = committed_positions(gen)
            if positions is not None:
                return positions, topic_ids(gen)
        return None

    def newest_topic_ids(self) -> dict[str, str]:
        """The source topic IDs the newest generation (committed or not) started with."""
        gens = _generations(self.flow_dir)
        return topic_ids(gens[-1][1]) if gens else {}

    def last_positions(self) -> Positions | None:
        last = self.last_committed()
        return None if last is None else last[0]

    def new_generation(self, source_topic_ids: Mapping[str, str] | None = None) -> Path:
        gens = _generations(self.flow_dir)
        number = gens[-1][0] + 1 if gens else 1
        path = self.flow_dir / f"{_PREFIX}{number}"
        path.mkdir(parents=True)
        if source_topic_ids:
            write_json(path / _TOPIC_IDS, dict(sorted(source_topic_ids.items())), durable=True)
        return path

    def prune(self, keep: Path) -> None:
        """Drop every generation but ``keep`` and the newest one that committed a batch."""
        gens = _generations(self.flow_dir)
        committed = [gen for _, gen in gens if gen != keep and committed_positions(gen)]
        for _, gen in gens:
            if gen != keep and (not committed or gen != committed[-1]):
                shutil.rmtree(gen, ignore_errors=True)


def starting_offsets(
    assignment: dict[str, int], known: Positions | None, first_run: str
) -> str:
    """Spark's ``startingOffsets`` JSON covering every assigned partition.

    Known partitions resume where they were; partitions never seen start at the earliest
    offset (new topics and new partitions are mirrored whole). On the very first run,
    ``first_run`` ("earliest" or "latest") decides.
    """
    default = -2 if known is not None or first_run == "earliest" else -1
    spec: dict[str, dict[str, int]] = {}
    for topic, count in sorted(assignment.items()):
        spec[topic] = {
            str(p): (known or {}).get((topic, p), default) for p in range(count)
        }
    return json.dumps(spec, separators=(",", ":"))
