"""Typed reading of configuration values; every failure names the key and the value."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kafka_mirror.errors import ConfigError


class Values:
    """Typed access to a flat mapping of strings, for errors that name source, key and value."""

    def __init__(
        self, props: Mapping[str, str], source: str, hidden: frozenset[str] = frozenset()
    ) -> None:
        self.props = props
        self.source = source
        self.hidden = hidden  # keys whose values came from a config provider: never shown

    def shown(self, key: str) -> str | None:
        if key in self.hidden:
            return "(from a config provider, not shown)"
        return self.props.get(key)

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(message, source=self.source, key=key, value=self.shown(key))

    def text(self, key: str, default: str) -> str:
        return self.props.get(key, default).strip()

    def boolean(self, key: str, default: bool) -> bool:
        raw = self.props.get(key)
        if raw is None:
            return default
        lowered = raw.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise self.error(key, "expected true or false")

    def integer(self, key: str, default: int, minimum: int | None = None) -> int:
        raw = self.props.get(key)
        if raw is None:
            return default
        try:
            value = int(raw.strip())
        except ValueError:
            raise self.error(key, "expected a whole number") from None
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}")
        return value

    def number(self, key: str, default: float, minimum: float = 0.0) -> float:
        raw = self.props.get(key)
        if raw is None:
            return default
        try:
            value = float(raw.strip())
        except ValueError:
            raise self.error(key, "expected a number") from None
        if value < minimum:
            raise self.error(key, f"must be at least {minimum:g}")
        return value

    def regex_list(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        raw = self.props.get(key)
        if raw is None:
            return default
        items = tuple(item.strip() for item in raw.split(",") if item.strip())
        for item in items:
            check_regex(item, self.error, key)
        return items

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.text(key, default)
        if value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}")
        return value


def check_regex(pattern: str, error: object, key: str) -> None:
    """Compile ``pattern`` or raise the error built by ``error(key, message)``."""
    try:
        re.compile(pattern)
    except re.error as exc:
        assert callable(error)
        raise error(key, f"invalid regular expression '{pattern}': {exc}") from None
