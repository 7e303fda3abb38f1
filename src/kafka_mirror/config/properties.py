"""Java ``.properties`` files, read the way ``java.util.Properties.load(InputStream)`` reads them,
which is how MirrorMaker 2 reads mm2.properties (Kafka's ``Utils.loadProps``): ISO-8859-1 bytes,
``\\uXXXX`` escapes, backslash continuation lines, ``=``, ``:`` or whitespace between key and
value, ``#`` and ``!`` comments, trailing blanks of values kept, and the last of duplicate keys
winning. The syntax itself is the javaproperties library's; tests compare the result with Java's
own ``Properties`` on tricky files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import javaproperties

from kafka_mirror.errors import ConfigError


@dataclass
class PropertiesFile:
    """Keys and values in file order (the last of duplicate keys wins), and notes about the
    file worth a warning (duplicate keys, naming both lines)."""

    values: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _line_breaks(text: str) -> int:
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def read_properties(data: bytes | str, source: str = "<string>") -> PropertiesFile:
    """Parse properties; ``bytes`` are decoded as ISO-8859-1, as Java does."""
    result = PropertiesFile()
    lines: dict[str, int] = {}
    line = 1
    try:
        for element in javaproperties.parse(data):
            if isinstance(element, javaproperties.KeyValue):
                if element.key in lines:
                    result.notes.append(
                        f"{source}: key '{element.key}' is set on line {lines[element.key]} and "
                        f"again on line {line}; the later one wins (as in Java)"
                    )
                result.values[element.key] = element.value
                lines[element.key] = line
            line += _line_breaks(element.source)
    except javaproperties.InvalidUEscapeError as exc:
        raise ConfigError(
            f"malformed \\uXXXX escape '{exc.escape}' near line {line} (Java refuses the file)",
            source=source,
        ) from None
    return result


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse properties text; later keys win, as in Java."""
    return read_properties(text, source).values


def read_properties_file(path: Path) -> PropertiesFile:
    """Read a properties file, with an error naming the file when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=str(path)) from None
    return read_properties(data, str(path))


def load_properties(path: Path) -> dict[str, str]:
    return read_properties_file(path).values
