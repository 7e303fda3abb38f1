"""Grafana's own dashboard model as a JSON Schema, for tests.

Grafana publishes the model of a classic dashboard (the JSON with ``panels`` that its "JSON
model" view shows and provisioning loads) as TypeScript types generated from its CUE kind:
``Dashboard`` in the npm package ``@grafana/schema``
(``dist/types/raw/dashboard/x/types.gen.d.ts``). ``ts-json-schema-generator`` turns that type
into a JSON Schema (draft 07): every interface becomes a closed object
(``additionalProperties: false``) with its required fields, every enum an ``enum``; only what
Grafana types as ``Record<string, unknown>`` (a panel's ``options``, ``fieldConfig.defaults.
custom``, each query in ``targets``, a variable's query object) takes any properties. What
CUE says beyond TypeScript is lost on the way: numbers are only ``number`` (no integer, no
range such as ``gridPos.w <= 24``).

The npm packages are installed with ``npm ci`` (npm's configured registry) from the lockfile
in tests/engine/data/grafana-schema (exact versions, integrity hashes) into a cache outside the
repository, ``${KAFKA_MIRROR_CACHE:-~/.cache/kafka-mirror}/grafana-schema/<key>``, ``<key>``
being a hash of the lockfile and of the generator's arguments; the generated schema is kept
there too, so only the first run installs and generates (a minute at most).
``python tests/engine/grafanaschema.py`` fills the cache (scripts/setup.sh --test runs it).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

NPM_PROJECT = Path(__file__).resolve().parent / "data" / "grafana-schema"
NPM_FILES = ("package.json", "package-lock.json")
TYPES = "node_modules/@grafana/schema/dist/types/raw/dashboard/x/types.gen.d.ts"
GENERATOR = "node_modules/.bin/ts-json-schema-generator"
# no --additional-properties: objects without an index signature stay closed
GENERATE_ARGS = ("--path", TYPES, "--type", "Dashboard")
SCHEMA_NAME = "dashboard.schema.json"
INSTALL_TIMEOUT = 600.0


class GrafanaSchemaError(RuntimeError):
    """The schema could not be made: npm missing, install or generation failed."""


def cache_root() -> Path:
    base = os.environ.get("KAFKA_MIRROR_CACHE") or "~/.cache/kafka-mirror"
    return Path(base).expanduser() / "grafana-schema"


def cache_key() -> str:
    digest = hashlib.sha256()
    for name in NPM_FILES:
        digest.update((NPM_PROJECT / name).read_bytes())
    digest.update("\0".join((GENERATOR, *GENERATE_ARGS)).encode())
    return digest.hexdigest()[:16]


def versions() -> dict[str, str]:
    """The pinned npm packages, name -> exact version."""
    deps: dict[str, str] = json.loads((NPM_PROJECT / "package.json").read_text())["dependencies"]
    return deps


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise GrafanaSchemaError(f"{what} did not finish in {INSTALL_TIMEOUT:.0f}s: "
                                 f"{' '.join(cmd)} (in {cwd})") from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-3000:]
        raise GrafanaSchemaError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)} "
                                 f"(in {cwd})\n{tail}")


def schema_file() -> Path:
    """The generated schema's path, installing the npm packages and generating it first if the
    cache has not got it yet. Raises GrafanaSchemaError saying why when it cannot."""
    key = cache_key()
    work = cache_root() / key
    out = work / SCHEMA_NAME
    if out.is_file():
        return out
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise GrafanaSchemaError(
            "npm/node are not installed: the dashboard schema check needs them to install "
            f"{', '.join(f'{n}@{v}' for n, v in versions().items())} (Debian package npm; "
            "scripts/setup.sh --test installs it)")
    work.mkdir(parents=True, exist_ok=True)
    with (work.parent / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be filling the same cache
        if out.is_file():
            return out
        for name in NPM_FILES:
            shutil.copyfile(NPM_PROJECT / name, work / name)
        _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
             work, "npm ci of the pinned Grafana schema tools")
        partial = work / f"{SCHEMA_NAME}.partial"
        _run([str(work / GENERATOR), *GENERATE_ARGS, "--out", str(partial)], work,
             "ts-json-schema-generator")
        try:
            schema = json.loads(partial.read_text())
        except (OSError, ValueError) as exc:
            raise GrafanaSchemaError(f"ts-json-schema-generator wrote no JSON: {exc}") from exc
        if schema.get("$ref") != "#/definitions/Dashboard":
            raise GrafanaSchemaError(f"unexpected schema root {schema.get('$ref')!r}")
        os.replace(partial, out)
    return out


def dashboard_schema() -> dict[str, Any]:
    """Grafana's classic dashboard model as a JSON Schema (draft 07)."""
    loaded: dict[str, Any] = json.loads(schema_file().read_text())
    return loaded


if __name__ == "__main__":
    try:
        print(schema_file())
    except GrafanaSchemaError as error:
        sys.exit(f"grafanaschema: {error}")
