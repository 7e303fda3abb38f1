"""Kerberos clients of the verifiers (scenarios "kerberos" and "fleet"): librdkafka over GSSAPI
against the Kerberized clusters of molecule/kerberos/kerberos-realm.py, as the principals it created.
The verifiers' conftest.py puts this directory on sys.path."""

import contextlib
import json
import os
import tempfile
import time
import uuid
from unittest import mock

MOL_HOME = os.environ.get("MOL_HOME") or "/tmp/kafka-mirror-molecule"
STATE_DIR = os.path.join(MOL_HOME, "kerberos")


def realm_state():
    """What kerberos-realm.py wrote: bootstrap addresses, principals, keytabs, krb5.conf."""
    with open(os.path.join(STATE_DIR, "state.json")) as fh:
        return json.load(fh)


@contextlib.contextmanager
def krb5_env(state, prefix="molecule-krb5-"):
    """Controller-side Kerberos clients (librdkafka runs kinit) use the test realm and private
    caches, in the temporary directory yielded, for as long as the block runs."""
    with mock.patch.dict(os.environ, {"KRB5_CONFIG": state["krb5_conf"]}), \
            tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield tmp


def client_conf(state, tmp, side, who, **extra):
    """librdkafka settings for ``who`` (a client principal) on ``side``'s GSSAPI listener. Each
    principal gets its own credential cache; clients of different principals are used one after the
    other (one default cache per process)."""
    os.environ["KRB5CCNAME"] = f"FILE:{tmp}/{who}.ccache"
    return {"bootstrap.servers": state["bootstrap"][side], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "GSSAPI", "sasl.kerberos.service.name": state["services"][side],
            "sasl.kerberos.keytab": state["keytabs"][who], "sasl.kerberos.principal": state["principals"][who],
            **extra}


def produce(state, tmp, sent, producer=None):
    """``sent`` ({(topic, key): partition}) produced to the source as the verifier's principal."""
    from confluent_kafka import Producer
    producer = producer or Producer(client_conf(state, tmp, "source", "molecule-client", **{"enable.idempotence": True}))
    for (topic, key), partition in sent.items():
        producer.produce(topic, key=key, value=b"kerberos", partition=partition)
    assert producer.flush(60) == 0, "records not delivered to the source over GSSAPI"


def read_mirrored(state, tmp, topics, sent, timeout, copies=None):
    """The records of ``sent`` ({(topic, key): partition}) found on the destination's ``topics``
    within ``timeout``: {(topic, key): partition}. With ``copies`` (a dict), every copy of each is
    counted there, the topics read to their end."""
    from confluent_kafka import Consumer, KafkaError
    consumer = Consumer(client_conf(state, tmp, "destination", "molecule-client", **{
        "group.id": f"molecule-krb-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000,
        "enable.partition.eof": copies is not None}))
    consumer.subscribe(topics)
    got, at_end = {}, set()
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            if len(got) == len(sent) and (copies is None or at_end >= _assigned(consumer)):
                break
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add((msg.topic(), msg.partition()))
                continue
            at_end.discard((msg.topic(), msg.partition()))
            if (msg.topic(), msg.key()) not in sent:
                continue
            got[(msg.topic(), msg.key())] = msg.partition()
            if copies is not None:
                copies[(msg.topic(), msg.key())] = copies.get((msg.topic(), msg.key()), 0) + 1
    finally:
        consumer.close()
    return got


def _assigned(consumer):
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}
