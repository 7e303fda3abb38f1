"""The Grafana dashboard loads as a valid dashboard model: it validates against Grafana's own
published model (``Dashboard`` of the npm package ``@grafana/schema``, generated from Grafana's
CUE kind, turned into a JSON Schema by grafanaschema.py), and copies broken on purpose do not."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grafanaschema import GrafanaSchemaError, dashboard_schema, versions
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "roles" / "mirror" / "files" / "monitoring" / "kafka-mirror-dashboard.json"


@pytest.fixture(scope="module")
def validator() -> Validator:
    try:
        schema = dashboard_schema()
    except GrafanaSchemaError as error:
        pytest.fail(f"Grafana's dashboard schema could not be made: {error}")
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _closest(error: ValidationError) -> list[ValidationError]:
    """Where no branch of a union matched (a panel is a Panel or a RowPanel), the errors of the
    branch that came closest: fewest errors, then the deepest."""
    if not error.context:
        return [error]
    branches: dict[Any, list[ValidationError]] = defaultdict(list)
    for sub in error.context:
        branches[sub.relative_schema_path[0]].append(sub)
    best = min(branches.values(),
               key=lambda errs: (len(errs), -max(len(e.absolute_path) for e in errs)))
    return [leaf for sub in best for leaf in _closest(sub)]


def errors(validator: Validator, model: Any) -> list[tuple[str, str]]:
    """(path, message) of every violation; the path is ``/``-joined, ``""`` for the top."""
    found = []
    for error in validator.iter_errors(model):
        for leaf in _closest(error):
            message = leaf.message
            if len(message) > 300:
                message = f"{message[:150]} ... {message[-120:]}"
            found.append(("/".join(str(p) for p in leaf.absolute_path), message))
    return sorted(found)


def dashboard() -> dict[str, Any]:
    model: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return model


def test_dashboard_is_a_valid_grafana_dashboard_model(validator: Validator) -> None:
    found = errors(validator, dashboard())
    assert not found, (f"{DASHBOARD.name} is not a valid dashboard model "
                       f"({', '.join(f'{n}@{v}' for n, v in versions().items())}):\n"
                       + "\n".join(f"  {path or '(top)'}: {message}" for path, message in found))


def test_schema_is_closed_but_for_plugin_defined_parts(validator: Validator) -> None:
    """Every object the model names is closed: an unknown or misspelt field is an error. Only the
    parts Grafana leaves to plugins (``Record<string, unknown>``) take any field."""
    schema = validator.schema
    assert isinstance(schema, dict) and schema["$ref"] == "#/definitions/Dashboard"
    definitions = schema["definitions"]
    objects = {name: d for name, d in definitions.items() if d.get("type") == "object"}
    assert {"Dashboard", "Panel", "RowPanel", "GridPos", "VariableModel",
            "FieldConfigSource"} <= set(objects)
    open_ = [name for name, d in objects.items() if d.get("additionalProperties") is not False]
    assert not open_, f"open objects in the generated schema: {open_}"
    panel = definitions["Panel"]["properties"]
    for anything in (panel["options"], panel["targets"]["items"]):
        assert (anything["type"], anything["additionalProperties"]) == ("object", {})


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Sets the value at a ``/``-path of the dashboard (list indexes as numbers)."""
    *parents, last = path.split("/")

    def breaks(model: dict[str, Any]) -> None:
        node: Any = model
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return breaks


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split("/")

    def breaks(model: dict[str, Any]) -> None:
        node: Any = model
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]
    return breaks


def _panels_as_object(model: dict[str, Any]) -> None:
    model["panels"] = {str(p["id"]): p for p in model["panels"]}


# how the copy is broken -> (breaks it, where the error must be told, a word of its message)
BROKEN: dict[str, tuple[Callable[[dict[str, Any]], None], str, str]] = {
    "gridPos as a string": (_set("panels/0/gridPos", "0,0,12,8"), "panels/0/gridPos", "type"),
    "panels as an object": (_panels_as_object, "panels", "'array'"),
    "unknown graphTooltip value": (_set("graphTooltip", 7), "graphTooltip", "one of"),
    "misspelt top-level field": (_set("pannels", []), "", "'pannels'"),
    "unknown panel field": (_set("panels/0/gridpos", {"h": 8, "w": 12, "x": 0, "y": 0}),
                            "panels/0", "'gridpos'"),
    "panel without type": (_delete("panels/0/type"), "panels/0", "'type'"),
    "gridPos without w": (_delete("panels/0/gridPos/w"), "panels/0/gridPos", "'w'"),
    "query target as a string": (_set("panels/0/targets/0", "sum(up)"), "panels/0/targets/0",
                                 "'object'"),
    "schemaVersion as a string": (_set("schemaVersion", "39"), "schemaVersion", "'number'"),
    "unknown variable type": (_set("templating/list/1/type", "label_values"),
                              "templating/list/1/type", "one of"),
    "variable hide out of range": (_set("templating/list/1/hide", 5), "templating/list/1/hide",
                                   "one of"),
    "time range without to": (_delete("time/to"), "time", "'to'"),
}


@pytest.mark.parametrize("breakage", list(BROKEN))
def test_broken_copy_of_the_dashboard_fails(validator: Validator, breakage: str) -> None:
    breaks, where, word = BROKEN[breakage]
    model = copy.deepcopy(dashboard())
    breaks(model)
    found = errors(validator, model)
    assert found, f"{breakage}: the schema accepted it"
    assert any(path == where and word in message for path, message in found), \
        f"{breakage}: expected an error at {where or '(top)'} about {word}, got {found}"
