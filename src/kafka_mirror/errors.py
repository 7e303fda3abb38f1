"""Errors that name their culprit: the file, the key and the value; and the one line that
reports a failure."""

from __future__ import annotations


def first_line(text: str) -> str:
    """The first non-blank line of ``text`` (at most 500 characters), for one-line reports."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:500] if lines else text


def reason(exc: BaseException) -> str:
    """One line on why a call failed: its first line, or for a call into the JVM the Java
    exception's own line rather than py4j's "An error occurred while calling ..." before it;
    the exception's type when it has no text."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling"):
        return lines[1].lstrip(": ")[:500]
    return lines[0][:500] if lines else type(exc).__name__


class MirrorError(Exception):
    """Base class for errors reported to the user without a traceback."""


class ConfigError(MirrorError):
    """A configuration value that cannot be used."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        self.source = source
        self.key = key
        self.value = value
        where = []
        if source:
            where.append(source)
        if key is not None:
            where.append(f"key '{key}'")
        if value is not None:
            where.append(f"value '{value}'")
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        super().__init__(prefix + message)


class ClusterUnreachable(MirrorError):
    """A cluster did not answer (or refused us) within the allowed time."""

    def __init__(self, alias: str, bootstrap: str, reason: str, seconds: float) -> None:
        self.alias = alias
        super().__init__(
            f"cluster '{alias}' ({bootstrap}) not usable after {seconds:.0f}s: {reason}"
        )


class TopicLayoutError(MirrorError):
    """A destination topic that cannot be made to match its source."""
