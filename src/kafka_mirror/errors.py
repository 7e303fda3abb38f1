"""Errors that name their culprit: the file, the key and the value."""

from __future__ import annotations


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
