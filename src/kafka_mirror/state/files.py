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


def encode(data: Any) -> str:
    """``data`` as the state files hold it: compact JSON."""
    return json.dumps(data, separators=(",", ":"))


class EncodedRows:
    """A state file's JSON array, one object per key in key order, kept encoded between saves:
    a save encodes only the rows that changed since the last (a file of thousands of
    partitions is rewritten after every real-time drain, which may have moved one of them).
    Keys are ``(topic, partition)``."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int], str] = {}
        self._order: list[tuple[str, int]] | None = []  # the keys sorted; None: sort again

    def set(self, key: tuple[str, int], row: Any) -> None:
        if key not in self._rows:
            self._order = None
        self._rows[key] = encode(row)

    def drop(self, key: tuple[str, int]) -> None:
        if self._rows.pop(key, None) is not None:
            self._order = None

    def clear(self) -> None:
        self._rows.clear()
        self._order = []

    def text(self) -> str:
        if self._order is None:
            self._order = sorted(self._rows)
        rows = self._rows
        return "[" + ",".join([rows[key] for key in self._order]) + "]"


def write_json(path: Path, data: Any, *, durable: bool = False) -> None:
    """Replace ``path`` with ``data`` as JSON; ``durable``: on disk (file and directory synced)
    before this returns, so that a machine crash does not bring back the previous version."""
    write_text(path, encode(data), durable=durable)


def write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Replace ``path`` with ``text`` (JSON already encoded), as :func:`write_json` does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        out.write(text)
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
