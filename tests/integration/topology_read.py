"""Prints, as JSON, what the kafka-mirror engine reads from a rendered mm2.properties: its raw keys and
values (the engine's java.util.Properties reader), the enabled flows with their topic and group
selection and naming policy, and every cluster's client settings as given to the Java clients and as
translated for librdkafka (sasl.username / sasl.password / Kerberos principal and keytab out of the
JAAS line). Run with the engine's Python: tests/integration/topology.yml compares the output with
the inventory values, byte for byte.

Usage: <engine venv>/bin/python topology_read.py FILE
       <engine venv>/bin/python topology_read.py --client FILE   (a MirrorMaker 1 style client file)
"""

import base64
import json
import os
import sys
from pathlib import Path

from kafka_mirror.config.mm2 import load_mm2
from kafka_mirror.config.model import MetricsSettings
from kafka_mirror.config.properties import load_properties
from kafka_mirror.kafka.clients import admin_properties
from kafka_mirror.kafka.librdkafka import librdkafka_config
from kafka_mirror.observability.endpoint_security import BasicAuthCheck


def main(path: str) -> None:
    data = Path(path).read_bytes()
    config = load_mm2(Path(path))
    print(json.dumps({
        "ascii": all(b < 0x80 for b in data),
        "raw": load_properties(Path(path)),
        "clusters": list(config.clusters),
        "flows": {
            flow.name: {
                "topics": list(flow.topic_filter.include),
                "topics_exclude": list(flow.topic_filter.exclude),
                "groups": list(flow.group_filter.include),
                "groups_exclude": list(flow.group_filter.exclude),
                "policy": type(flow.policy).__name__,
                "separator": getattr(flow.policy, "separator", None),
                "target_topic": flow.target_topic("t"),
                "sync_topic_configs": flow.sync_topic_configs,
                "sync_group_offsets": flow.syncs.sync_group_offsets,
            }
            for flow in config.flows
        },
        "client": {alias: dict(c.client) for alias, c in config.clusters.items()},
        "consumer": {alias: dict(c.consumer) for alias, c in config.clusters.items()},
        "producer": {alias: dict(c.producer) for alias, c in config.clusters.items()},
        "admin": {alias: dict(c.admin) for alias, c in config.clusters.items()},
        "librdkafka": {
            alias: librdkafka_config(admin_properties(c), f"cluster '{alias}'")
            for alias, c in config.clusters.items()
        },
        "notices": list(config.notices),
        # the pairs that write heartbeats (into their target), enabled or not
        "heartbeats": sorted(f"{h.source.alias}->{h.target.alias}" for h in config.heartbeats),
        "metrics": metrics(config.metrics),
    }, ensure_ascii=True, sort_keys=True))


def metrics(settings: MetricsSettings | None) -> dict[str, object] | None:
    """The endpoint's settings; with TOPOLOGY_METRICS_PASSWORD in the environment, whether the
    engine's basic authentication accepts that password."""
    if settings is None:
        return None
    auth, tls = settings.basic_auth, settings.tls
    password = os.environ.get("TOPOLOGY_METRICS_PASSWORD")
    header = None if password is None or auth is None else "Basic " + base64.b64encode(
        f"{auth.username}:{password}".encode()).decode()
    return {
        "scheme": settings.scheme,
        "username": None if auth is None else auth.username,
        "accepts": None if header is None or auth is None else BasicAuthCheck(auth).accepts(header),
        "keystore": None if tls is None else tls.keystore_location,
        "keystore_type": None if tls is None else tls.keystore_type,
        "keystore_password_given": None if tls is None else bool(tls.keystore_password),
    }


def client(path: str) -> None:
    """A consumer.properties / producer.properties: keys and values, and the librdkafka settings."""
    raw = load_properties(Path(path))
    print(json.dumps({"raw": raw, "librdkafka": librdkafka_config(raw, path)},
                     ensure_ascii=True, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1] == "--client":
        client(sys.argv[2])
    else:
        main(sys.argv[1])
