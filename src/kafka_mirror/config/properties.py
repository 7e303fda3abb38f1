"""Java ``.properties`` files, read the way ``java.util.Properties.load`` reads them."""

from __future__ import annotations

from pathlib import Path

from kafka_mirror.errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines; return (first line number, joined text) pairs."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        out.append((start, (pending or "") + line))
        pending = None
    if pending is not None:
        out.append((start, pending))
    return out


def _unescape(text: str, source: str, number: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ConfigError(
                    f"malformed \\u escape '\\u{digits}' on line {number}", source=source
                ) from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse properties text; later keys win, as in Java."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key(line)
        result[_unescape(key, source, number)] = _unescape(value, source, number)
    return result


def load_properties(path: Path) -> dict[str, str]:
    """Read a properties file, with an error naming the file when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", source=str(path)) from None
    return parse_properties(text, str(path))
