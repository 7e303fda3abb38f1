"""The mirror's small JSON state files (offset ranges, target ends, acknowledged positions):
each written whole to a temporary file that then replaces it, so a crash leaves the previous
version or the new one, never a mix; and each read so that a file a power loss tore or emptied
costs what it held, with a warning naming it, never a start that fails every time.

A file of rows (one per partition, :class:`EncodedRows`) that changes a few rows at a time (a
real-time drain, about once a second, moves one partition of thousands) grows instead: the rows
changed since the last write are appended, one per line, after the JSON array the file was last
written whole with, and a later row of a key replaces an earlier one. It is written whole again
once the appended lines outweigh the array. A crash during an append tears at most the last
line, which was never reported written: it is left out, with a warning naming the file."""

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
        return parse(_rows_of(path, text))
    except UNREADABLE as exc:
        kept = path.with_name(f"{path.name}.unreadable")
        try:
            os.replace(path, kept)
        except OSError:
            kept = path
        log.warning("%s is not readable (%s: %s), kept as %s: %s", path, type(exc).__name__,
                    exc, kept.name, without)
        return None


def _rows_of(path: Path, text: str) -> Any:
    """The JSON of ``text``: a value, or a file of rows: its array, with the rows appended
    after it (see :class:`EncodedRows`) added in order; a torn last line is left out."""
    try:
        return json.loads(text)
    except ValueError:
        first, newline, appended = text.partition("\n")
        if not newline:
            raise
    rows = json.loads(first)
    if not isinstance(rows, list):
        raise ValueError(f"a {type(rows).__name__} before appended rows")
    lines = appended.split("\n")
    for index, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except ValueError:
            if index < len(lines) - 1:
                raise
            log.warning("%s: its last line is torn (a write cut short by a crash), left out: "
                        "the rows before it are read", path)
    return rows


def encode(data: Any) -> str:
    """``data`` as the state files hold it: compact JSON."""
    return json.dumps(data, separators=(",", ":"))


class EncodedRows:
    """A state file's JSON array, one object per key in key order, kept encoded between saves:
    a save encodes only the rows that changed since the last, and appends them to the file while
    the appended lines do not outweigh the array it was last written whole with (a file of
    thousands of partitions is saved after every real-time drain, which may have moved one of
    them). Keys are ``(topic, partition)``."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int], str] = {}
        self._order: list[tuple[str, int]] | None = []  # the keys sorted; None: sort again
        self._pending: dict[tuple[str, int], str] = {}  # rows set since the last save
        self._saved: Path | None = None  # the file the last save wrote (None: write it whole)
        self._whole = 0  # characters of the file's array
        self._appended = 0  # characters appended after it

    def set(self, key: tuple[str, int], row: Any) -> None:
        if key not in self._rows:
            self._order = None
        self._rows[key] = self._pending[key] = encode(row)

    def drop(self, key: tuple[str, int]) -> None:
        if self._rows.pop(key, None) is not None:
            self._order = None
            self._saved = None  # a row gone is written whole

    def clear(self) -> None:
        self._rows.clear()
        self._order = []
        self._pending.clear()
        self._saved = None

    def text(self) -> str:
        """The whole array."""
        if self._order is None:
            self._order = sorted(self._rows)
        rows = self._rows
        return "[" + ",".join([rows[key] for key in self._order]) + "]"

    def save(self, path: Path, *, durable: bool = False) -> None:
        """``path`` holds every row when this returns (``durable``: on disk): the rows set since
        the last save appended, or the whole array written (see :func:`write_text`)."""
        added = "".join("\n" + row for row in self._pending.values())
        if (self._saved != path or self._appended + len(added) > self._whole
                or not path.is_file()):
            text = self.text()
            write_text(path, text, durable=durable)
            self._saved, self._whole, self._appended = path, len(text), 0
        elif added:
            self._saved = None  # until the append is complete: a failed one is written whole
            with path.open("a", encoding="utf-8") as out:
                out.write(added)
                if durable:
                    out.flush()
                    os.fsync(out.fileno())
            self._saved, self._appended = path, self._appended + len(added)
        self._pending.clear()


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
