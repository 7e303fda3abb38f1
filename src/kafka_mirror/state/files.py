"""The mirror's small JSON state files (offset ranges, target ends, acknowledged positions):
each written whole to a temporary file that then replaces it, so a crash leaves the previous
version or the new one, never a mix."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any, *, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` as JSON; ``durable``: on disk (file and directory synced)
    before this returns, so that a machine crash does not bring back the previous version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        out.write(json.dumps(data, separators=(",", ":")))
        if durable:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, path)
    if durable:
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
