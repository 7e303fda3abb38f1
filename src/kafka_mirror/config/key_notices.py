"""Notices for mm2.properties keys the mirror does not act on: unknown keys (with a suggestion)
and MirrorMaker 2 keys it does not support (with why). Nothing here is fatal."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_mirror.config import keys
from kafka_mirror.mm2.policy import POLICY_CLASSES

ENGINE_KEYS = frozenset({"mirror.state.dir", "mirror.metrics.port", "mirror.metrics.bind.address",
                         "mirror.class.data.sharing", "mirror.class.data.dir",
                         *(f"mirror.metrics.basic.auth.{k}" for k in (
                             "username", "password.hash", "salt", "algorithm", "iterations",
                             "key.length")),
                         *(f"mirror.metrics.ssl.{k}" for k in (
                             "keystore.location", "keystore.type", "keystore.password",
                             "key.password"))})
_PASSED_ON = ("spark.", "config.providers")


def key_notices(props: Mapping[str, str], aliases: list[str], origin: str) -> list[str]:
    """Notices for keys kafka-mirror does not act on; nothing here is fatal."""
    notices: list[str] = []
    known = sorted(keys.FLOW_KEYS | ENGINE_KEYS | {"clusters"})
    # a policy class of the user's own gets every replication.policy* key, as in MM2
    custom_policy = any(
        k.endswith("replication.policy.class") and v.strip() not in POLICY_CLASSES
        for k, v in props.items()
    )
    policy_keys = ("replication.policy.",) if custom_policy else ()

    def unused(key: str, rest: str) -> bool:
        why = keys.not_supported(rest)
        if why:
            notices.append(f"{origin}: '{key}' not supported: {why}")
        return why is not None

    for key in props:
        if key == "clusters" or key in ENGINE_KEYS or key.startswith((*_PASSED_ON, *policy_keys)):
            continue
        match = keys.FLOW_KEY.fullmatch(key)
        if match:
            rest = match["key"]
            if rest in keys.FLOW_KEYS and rest.startswith("offset.storage."):
                # MirrorMakerConfig.workerConfig reads them top-level or as <target>.*, and a
                # flow's keys reach its connectors only (where Connect ignores these)
                notices.append(
                    f"{origin}: '{key}' ignored, as MirrorMaker 2 does: offset.storage.* is read "
                    f"at the top level or as '{match['target']}.{rest}', not per flow"
                )
                continue
            if rest in keys.FLOW_KEYS or rest.startswith((*keys.CLIENT_ROLES, *policy_keys)):
                continue
            if not unused(key, rest):
                notices.append(
                    f"{origin}: unknown key '{key}' ignored{keys.suggestion(rest, known)}"
                )
            continue
        head, _, rest = key.partition(".")
        if head in aliases and rest:
            if keys.is_client_key(rest) or rest.startswith(keys.CLIENT_ROLES):
                continue
            if rest in keys.FLOW_KEYS and rest.startswith("offset.storage."):
                continue
            if not unused(key, rest):
                notices.append(f"{origin}: unknown key '{key}' ignored")
            continue
        if key in keys.FLOW_KEYS or keys.is_client_key(key) or key.startswith(keys.CLIENT_ROLES):
            continue
        if not unused(key, key):
            notices.append(f"{origin}: unknown key '{key}' ignored{keys.suggestion(key, known)}")
    return notices


