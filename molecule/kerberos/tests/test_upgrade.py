"""Upgrade and rollback of the kafka_mirror engine by release bundle (issue 29, "Day-2 operations"),
on km-krb-km, under continuous produce over GSSAPI, between two releases of different code.

The scenario's bundle is this tree's, version N (pyproject.toml). The previous release, N-1 (the
newest release of changelogs/changelog.yaml below N), is built by the documented command
(scripts/build-bundle.sh) from its own tree: its commit (the tag `v<N-1>`, or in a clone without
tags the commit that set galaxy.yml to N-1), exported with `git archive`.
kafka.mirror.site pointed at N-1's bundle is refused (an older kafka-mirror) and changes nothing;
with mirror_allow_downgrade=true the host goes to N-1 (the documented rollback), and then back to
N's bundle (the upgrade from N-1 to N). Each of the two runs plans the change per host
(`kafka-mirror N -> N-1, pyspark ..., confluent-kafka ...`), stops the instance, archives its state to
/var/lib/kafka-mirror-snapshots and starts it on the other installation, waited for like any
rolling restart; every record produced meanwhile is on the target exactly once."""

import os
import subprocess
import threading
import time
import uuid

import pytest
from krb_clients import client_conf, read_mirrored
from releases import REPO, rollback_then_upgrade

TOPIC, PARTITIONS = "molecule.orders", 3


def _site(name, *args, timeout=1500):
    """kafka.mirror.site on host ``name`` only (--limit: an upgrade of one host; the scenario's
    other host runs stock MirrorMaker 2, which the kafka_mirror bundle does not change)."""
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    playbook = os.path.join(REPO, "molecule", "_shared", "converge.yml")
    # the controller's modules log in with their own keytabs: not the verifier's credential cache
    env = {k: v for k, v in os.environ.items() if k != "KRB5CCNAME"}
    began = time.monotonic()
    run = subprocess.run(["ansible-playbook", "-i", inventory, playbook, "--limit", name,
                          "-e", "kafka_mirror_restart_pause=3", *args],
                         capture_output=True, text=True, timeout=timeout, check=False, env=env)
    print(f"site {' '.join(args)}: {time.monotonic() - began:.0f} s")   # where the test's time goes (-s)
    return run


def _site_under_produce(name, state, tmp, *args):
    """kafka.mirror.site on host ``name`` with ``args`` while records go to the source's TOPIC (from 2 s before the run
    to 2 s after it); returns the run and {(topic, key): partition} of every record sent."""
    from confluent_kafka import Producer
    # idempotent: a produce request retried under load never writes a record twice on the source,
    # so a record twice on the target is the mirror's
    producer = Producer(client_conf(state, tmp, "source", "molecule-client",
                                    **{"linger.ms": 5, "enable.idempotence": True}))
    result = {}
    run = threading.Thread(target=lambda: result.update(proc=_site(name, *args)))
    marker, sent = uuid.uuid4().hex, {}

    def send_while(going):
        while going():
            i = len(sent)
            key = f"{marker}-{i}".encode()
            producer.produce(TOPIC, key=key, value=b"upgrade", partition=i % PARTITIONS)
            sent[(TOPIC, key)] = i % PARTITIONS
            producer.poll(0)
            time.sleep(0.02)

    began = time.monotonic()
    send_while(lambda: time.monotonic() - began < 2)
    run.start()
    send_while(run.is_alive)
    ended = time.monotonic()
    send_while(lambda: time.monotonic() - ended < 2)
    run.join()
    assert producer.flush(60) == 0, "records not delivered to the source over GSSAPI"
    return result["proc"], sent


def _assert_each_once(host, state, tmp, sent):
    alias = host.ansible.get_variables()["mirror_source_alias"]
    want = {(f"{alias}.{topic}", key): partition for (topic, key), partition in sent.items()}
    copies = {}
    got = read_mirrored(state, tmp, sorted({t for t, _ in want}), want, 300, copies=copies)
    assert len(got) == len(want), f"{len(want) - len(got)}/{len(want)} records not mirrored"
    assert got == want, "records in other partitions"
    twice = {key: n for key, n in copies.items() if n > 1}
    assert not twice, f"{len(twice)} records on the target more than once"


def test_rollback_to_the_previous_release_then_upgrade_by_bundle_under_produce(krb_host, state, krb_env):
    host = krb_host
    hv = host.ansible.get_variables()
    if hv.get("mirror_engine", "kafka_mirror") != "kafka_mirror":
        pytest.skip("upgrades of the kafka_mirror engine")
    name = hv["inventory_hostname"]
    rollback_then_upgrade(host, lambda *args: _site(name, *args),
                          lambda *args: _site_under_produce(name, state, krb_env, *args),
                          lambda sent: _assert_each_once(host, state, krb_env, sent))
