"""The mirror's small JSON state files (offset ranges, target ends, acknowledged positions):
each written whole to a temporary file that then replaces it, so a crash leaves the previous
version or the new one, never a mix; and each read so that a file a power loss tore or emptied
costs what it held, with a warning naming it, never a start that fails every time."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# what a file that does not hold the JSON its reader expects raises while it is parsed
UNREADABLE = (ValueError, KeyError, TypeError, AttributeError)


def read_json(path: Path, parse: Callable[[Any], T], without: str) -> T | None:
    """``parse`` of ``path``'s JSON; None when the file is missing, or unreadable: torn, empty
    or of another shape (a machine that lost power after the file was replaced but before its
    data reached the disk). An unreadable file is kept beside as ``<name>.unreadable`` and one
    WARNING names it and ``without``: what the flow does instead."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return parse(json.loads(text))
    except UNREADABLE as exc:
        kept = path.with_name(f"{path.name}.unreadable")
        try:
            os.replace(path, kept)
        except OSError:
            kept = path
        log.warning("%s is not readable (%s: %s), kept as %s: %s", path, type(exc).__name__,
                    exc, kept.name, without)
        return None


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
