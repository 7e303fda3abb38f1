"""Kafka config providers in configuration values: ``${file:/path:key}``, ``${dir:/path:file}``,
``${env:NAME}``, resolved as Kafka's ``ConfigTransformer`` with ``FileConfigProvider``,
``DirectoryConfigProvider`` and ``EnvVarConfigProvider`` resolves them.

``config.providers = file,dir,env`` names them; ``config.providers.<name>.class`` says which class
each is, and ``config.providers.<name>.param.allowed.paths`` (file, dir) or
``...param.allowlist.pattern`` (env) restrict them, as in Kafka. Text that names a provider not
configured stays as it is, as Kafka leaves it (a password may hold ``${x:y}``), except in
``bootstrap.servers``, where it can never be an address. Unlike Kafka, which also leaves a
reference to a configured provider in place when it cannot resolve it, such a reference is an
error that names the key and the provider. Resolved values may be secrets: errors never show them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from kafka_mirror.config.properties import read_properties
from kafka_mirror.errors import ConfigError

# Kafka's ConfigTransformer.DEFAULT_PATTERN
_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
_PACKAGE = "org.apache.kafka.common.config.provider."
PROVIDER_CLASSES = {
    _PACKAGE + "FileConfigProvider": "file",
    _PACKAGE + "DirectoryConfigProvider": "dir",
    _PACKAGE + "EnvVarConfigProvider": "env",
}


class _Providers:
    def __init__(self, props: Mapping[str, str], source: str) -> None:
        self.source = source
        self.kinds: dict[str, str] = {}
        self.params: dict[str, dict[str, str]] = {}
        names = [n.strip() for n in props.get("config.providers", "").split(",") if n.strip()]
        for name in names:
            key = f"config.providers.{name}.class"
            cls = props.get(key, "").strip()
            if cls not in PROVIDER_CLASSES:
                raise ConfigError(
                    "config provider class not supported (FileConfigProvider, "
                    "DirectoryConfigProvider and EnvVarConfigProvider are)" if cls else
                    "config provider without a class",
                    source=source, key=key, value=cls or None,
                )
            self.kinds[name] = PROVIDER_CLASSES[cls]
            prefix = f"config.providers.{name}.param."
            self.params[name] = {
                k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)
            }

    def _fail(self, key: str, provider: str, message: str) -> ConfigError:
        return ConfigError(f"config provider '{provider}': {message}", source=self.source,
                           key=key)

    def _allowed(self, key: str, provider: str, path: Path) -> None:
        allowed = self.params[provider].get("allowed.paths", "").strip()
        if not allowed:
            return
        real = Path(os.path.normpath(path))
        roots = [Path(os.path.normpath(p.strip())) for p in allowed.split(",") if p.strip()]
        if not any(real == root or root in real.parents for root in roots):
            raise self._fail(key, provider, f"{path} is not under allowed.paths")

    def resolve(self, key: str, provider: str, path: str | None, name: str) -> str:
        kind = self.kinds.get(provider)
        if kind is None:
            raise self._fail(
                key, provider, "not configured (list it in config.providers with its .class)"
            )
        if kind == "env":
            if path:
                raise self._fail(key, provider, "EnvVarConfigProvider takes no path")
            pattern = self.params[provider].get("allowlist.pattern", ".*")
            if not re.fullmatch(pattern, name):
                raise self._fail(key, provider, f"variable {name} is not in allowlist.pattern")
            if name not in os.environ:
                raise self._fail(key, provider, f"environment variable {name} is not set")
            return os.environ[name]
        if not path:
            raise self._fail(key, provider, "a path is needed: ${" + provider + ":/path:key}")
        target = Path(path)
        self._allowed(key, provider, target)
        if kind == "file":
            try:
                values = read_properties(target.read_text(encoding="utf-8"), str(target)).values
            except OSError as exc:
                raise self._fail(key, provider, f"cannot read {path}: {exc.strerror}") from None
            if name not in values:
                raise self._fail(key, provider, f"{path} has no key '{name}'")
            return values[name]
        file = target / name
        if not file.is_file() or file.parent != target:
            raise self._fail(key, provider, f"{path} has no file '{name}'")
        try:
            return file.read_text(encoding="utf-8")
        except OSError as exc:
            raise self._fail(key, provider, f"cannot read {file}: {exc.strerror}") from None


def resolve_providers(
    props: Mapping[str, str], source: str
) -> tuple[dict[str, str], frozenset[str]]:
    """Every value with its references resolved, and the keys whose values came (in part) from
    a provider (never shown in errors or output)."""
    providers = _Providers(props, source)
    resolved: dict[str, str] = {}
    hidden: set[str] = set()
    for key, value in props.items():
        if key.startswith("config.providers") or not _REFERENCE.search(value):
            resolved[key] = value
            continue
        if not providers.kinds and not key.endswith("bootstrap.servers"):
            # no provider configured: Kafka leaves the text as it is (a password may hold it)
            resolved[key] = value
            continue

        def substitute(match: re.Match[str], key: str = key) -> str:
            provider, path, name = match.group(1), match.group(2), match.group(3)
            if provider not in providers.kinds and not key.endswith("bootstrap.servers"):
                # a provider not configured: Kafka's ConfigTransformer leaves the text as it is
                return match.group(0)
            return providers.resolve(key, provider, path, name)

        new = _REFERENCE.sub(substitute, value)
        if new != value:
            hidden.add(key)
        resolved[key] = new
    return resolved, frozenset(hidden)
