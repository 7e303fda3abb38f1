"""The configuration MirrorMaker 2 gives the connectors of flow ``A->B``, and so the
``configure`` of a custom replication policy: Kafka 4.3.1's
``MirrorMakerConfig.connectorBaseConfig``.

In that order: the top-level keys the connectors define (MM2 drops the others; kafka-mirror
knows the MM2 ones among them: :data:`keys.FLOW_KEYS` without its own ``mirror.*``, and
``security.protocol``, ``ssl.*``, ``sasl.*``), every ``config.providers*`` and
``replication.policy*`` key, each cluster's settings as ``source.cluster.<key>`` /
``target.cluster.<key>`` (client roles as ``source.consumer.<key>`` ...), ``name``,
``connector.class``, ``source.cluster.alias`` and ``target.cluster.alias`` where not set, then the
flow's ``A->B.<key>`` keys with the prefix stripped, over everything; ``enabled`` is ``false``
where not set. Values are the resolved ones
(MM2's worker resolves config providers before a connector sees its configuration).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_mirror.config import keys

SOURCE_CONNECTOR = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
_PASSED_PREFIXES = ("config.providers", "replication.policy")
_CONNECTOR_CLIENT_KEYS = ("security.protocol", "ssl.", "sasl.")
_ROLES = ("producer.", "consumer.", "admin.")


def _strip(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def _connector_key(key: str) -> bool:
    return (
        (key in keys.FLOW_KEYS and not key.startswith(("mirror.", "offset.storage.")))
        or key.startswith(_PASSED_PREFIXES)
        or keys.matches(key, _CONNECTOR_CLIENT_KEYS)
    )


def cluster_props(props: Mapping[str, str], alias: str) -> dict[str, str]:
    """MM2's ``clusterProps``: the ``<alias>.`` keys, client keys copied to each client role,
    then the top-level client keys where the cluster does not set them."""
    out = _strip(props, alias + ".")
    for key in [k for k in out if keys.is_client_key(k)]:
        for role in _ROLES:
            out.setdefault(role + key, out[key])
    for key, value in props.items():
        if keys.is_client_key(key):
            for role in _ROLES:
                out.setdefault(role + key, value)
            out.setdefault(key, value)
    return out


def connector_config(props: Mapping[str, str], source: str, target: str) -> dict[str, str]:
    """What MM2 hands the connectors (and their replication policy) of ``source->target``;
    ``props`` are the file's keys (config providers resolved)."""
    out = {k: v for k, v in props.items() if _connector_key(k)}
    for side, alias in (("source.", source), ("target.", target)):
        for key, value in cluster_props(props, alias).items():
            client_role = key.startswith(("consumer", "producer", "admin"))
            out[side + key if client_role else side + "cluster." + key] = value
    out.setdefault("name", SOURCE_CONNECTOR.rsplit(".", 1)[1])
    out.setdefault("connector.class", SOURCE_CONNECTOR)
    out.setdefault("source.cluster.alias", source)
    out.setdefault("target.cluster.alias", target)
    out.update(_strip(props, f"{source}->{target}."))
    out.setdefault("enabled", "false")
    return out
