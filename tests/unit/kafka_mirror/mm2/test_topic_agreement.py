"""The engine selects and names topics as the collection's modules do: both are checked against
the same MirrorMaker 2 cases (tests/unit/plugins/module_utils/mm2_topic_cases.json), here through
the engine's own configuration path (mm2.properties -> FlowSpec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafka_mirror.config.mm2 import mm2_from_text
from kafka_mirror.config.model import FlowSpec
from kafka_mirror.mm2 import rules
from kafka_mirror.mm2.rules import IDENTITY_POLICY_CLASS

REPO = Path(__file__).resolve().parents[4]
CASES_FILE = REPO / "tests" / "unit" / "plugins" / "module_utils" / "mm2_topic_cases.json"
CASES: dict[str, Any] = json.loads(CASES_FILE.read_text())


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\")


def flow_of(case: dict[str, Any]) -> FlowSpec:
    """The flow A->B that mm2.properties with the case's settings gives the engine."""
    lines = [
        "clusters = A, B",
        "A.bootstrap.servers = a:9092",
        "B.bootstrap.servers = b:9092",
        "A->B.enabled = true",
        f"A->B.topics = {_escaped(', '.join(case['topics']))}",
        f"replication.policy.separator = {case['separator']}",
    ]
    if case["topics_exclude"] is not None:
        lines.append(f"A->B.topics.exclude = {_escaped(', '.join(case['topics_exclude']))}")
    if case["policy"] == "identity":
        lines.append(f"replication.policy.class = {IDENTITY_POLICY_CLASS}")
    (flow,) = mm2_from_text("\n".join(lines) + "\n").flows
    return flow


@pytest.mark.parametrize("case", CASES["cases"], ids=lambda case: case["name"])
def test_engine_selects_and_names_as_the_cases_say(case: dict[str, Any]) -> None:
    flow = flow_of(case)
    names = CASES["names"]
    selected = {name: flow.target_topic(name) for name in names if flow.should_mirror(name)}
    assert selected == case["selected"]
    for name in case["skipped_cycles"]:
        assert flow.policy.is_cycle(name, "B"), name


def test_the_cases_cover_every_kind_of_name() -> None:
    """Internal and kafka-mirror's own topics are selected by no case, every other name by some
    case: the cases exercise each rule both ways."""
    for name in CASES["names"]:
        chosen = [name in case["selected"] for case in CASES["cases"]]
        if name in ("__consumer_offsets", "__transaction_state", ".hidden",
                    "mm2-offsets.A.internal", "mm2-configs.B.internal", "mm2-status.B.internal",
                    "mm2-offset-syncs.B.internal", "kafka-mirror.offset-syncs"):
            assert not any(chosen), name   # never mirrored, whatever the settings
        else:
            assert any(chosen), name


def test_the_engine_runs_the_collections_file() -> None:
    """One copy: kafka_mirror.mm2.rules is the collection's module_utils/mm2_rules.py itself."""
    shipped = REPO / "plugins" / "module_utils" / "mm2_rules.py"
    assert Path(rules.__file__).resolve() == shipped.resolve()
    assert not shipped.is_symlink()
