"""inventories/example converged as shipped (molecule/example): the mirror on mirror01.example.net
submitted to the Spark standalone cluster of the inventory (master there, workers spark01/spark02),
reading dc1 over SASL_SSL + GSSAPI and writing dc2 over SASL_SSL + SCRAM-SHA-512, 3 nodes each.
The records are produced and read through the clusters' PLAINTEXT listeners on the controller's
loopback (example-clusters.py); the mirror reaches them only by the names the inventory gives."""

import json
import os
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "_shared"))
from spark_ui import master_state  # noqa: E402

MOL_HOME = os.environ.get("MOL_HOME") or "/tmp/kafka-mirror-molecule"


@pytest.fixture(scope="module")
def state():
    with open(os.path.join(MOL_HOME, "example", "state.json")) as fh:
        return json.load(fh)


def _name(host):
    return host.ansible.get_variables()["inventory_hostname"]


def test_mirror_service_runs_on_mirror01(host):
    if _name(host) != "mirror01.example.net":
        pytest.skip("not the mirror host")
    svc = host.service("kafka-mirror")
    assert svc.is_running and svc.is_enabled


def test_spark_cluster_of_the_inventory_runs_the_mirror(host):
    """The master (on mirror01) sees both workers and the mirror's application with executors."""
    if _name(host) != "mirror01.example.net":
        pytest.skip("not the Spark master")
    state = master_state(host, "10.77.0.41", 2, polls=90)
    assert state.get("aliveworkers") == 2, state
    apps = state.get("activeapps", [])
    assert any("kafka-mirror" in (a.get("name") or "") for a in apps), apps
    assert apps[0].get("cores", 0) > 0, apps


def test_spark_workers_run(host):
    if not _name(host).startswith("spark0"):
        pytest.skip("not a Spark worker")
    svc = host.service("spark-worker")
    assert svc.is_running and svc.is_enabled


def _end_offsets(bootstrap, topics):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "molecule-example-ends"})
    try:
        ends = {}
        meta = consumer.list_topics(timeout=30).topics
        for topic in topics:
            if topic not in meta:
                continue
            for p in meta[topic].partitions:
                ends[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        return ends
    finally:
        consumer.close()


def test_selected_topics_mirrored_record_for_record(host, state):
    """Records produced now to every topic the inventory selects reach dc2 (DefaultReplicationPolicy:
    dc1.<topic>) in the same partitions, each once; orders.audit-tmp (the exclude list's .*-tmp)
    is not mirrored."""
    from confluent_kafka import Consumer, Producer

    if _name(host) != "mirror01.example.net":
        pytest.skip("checked once")
    topics = state["topics"]
    selected = [t for t in topics if not t.endswith("-tmp")]
    marker = uuid.uuid4().hex
    producer = Producer({"bootstrap.servers": state["plaintext"]["dc1"], "acks": "all"})
    sent = {}
    for topic in selected:
        for i in range(5 * topics[topic]):
            key = f"{marker}-{topic}-{i}".encode()
            producer.produce(topic, key=key, value=b"late %d" % i, partition=i % topics[topic])
            sent[key] = (f"dc1.{topic}", i % topics[topic])
    assert producer.flush(60) == 0
    source_ends = _end_offsets(state["plaintext"]["dc1"], selected)

    consumer = Consumer({"bootstrap.servers": state["plaintext"]["dc2"], "group.id": f"molecule-example-{marker}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 2000})
    got, seen = {}, {}
    try:
        consumer.subscribe([f"dc1.{t}" for t in selected])
        deadline = time.monotonic() + 300
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            seen[(msg.topic(), msg.partition())] = seen.get((msg.topic(), msg.partition()), 0) + 1
            if msg.key() in sent:
                assert msg.key() not in got, f"{msg.key()!r} twice"
                got[msg.key()] = (msg.topic(), msg.partition())
    finally:
        consumer.close()
    assert got == sent, f"{len(got)} of {len(sent)} records mirrored"
    # every record of the source (the seed ones too) once: the target's ends equal the source's
    target_ends = _end_offsets(state["plaintext"]["dc2"], [f"dc1.{t}" for t in selected])
    assert target_ends == {(f"dc1.{t}", p): end for (t, p), end in source_ends.items()}
    assert not _end_offsets(state["plaintext"]["dc2"], ["dc1.orders.audit-tmp"])


FLEET_HOSTS = {"mirror01.example.net": "10.77.0.41", "mirror02.example.net": "10.77.0.42",
               "mirror03.example.net": "10.77.0.43"}


def test_fleet_inventory_plans_in_check_mode(host, state):
    """`ansible-playbook -i inventories/fleet/hosts.yml kafka.mirror.site --check --diff` as shipped (its
    files/ filled, the bundle path and the vault's passwords given, site-run.sh), against this
    scenario's hosts (mirror01: the example's mirror; mirror02 and mirror03: hosts without a
    mirror yet) and the fleet's clusters dc1, dc2, dc3: it plans every host's flows, changes
    nothing, and shows no secret."""
    import shutil
    import subprocess

    if _name(host) != "mirror01.example.net":
        pytest.skip("run once")
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    inventory = os.path.join(MOL_HOME, "fleet-inventory")
    shutil.rmtree(inventory, ignore_errors=True)
    shutil.copytree(os.path.join(repo, "inventories", "fleet"), inventory)
    shutil.copytree(state["fleet_files"], os.path.join(inventory, "files"), dirs_exist_ok=True)
    overlay = os.path.join(MOL_HOME, "fleet-overlay.yml")
    with open(overlay, "w") as fh:
        fh.write("all:\n  vars:\n    ansible_user: kmdeploy\n"
                 f"    ansible_ssh_private_key_file: {MOL_HOME}/id_ed25519\n"
                 "    ansible_python_interpreter: /usr/bin/python3\n  hosts:\n"
                 + "".join(f"    {name}: {{ansible_host: {ip}}}\n" for name, ip in FLEET_HOSTS.items()))
    site_vars = os.path.join(MOL_HOME, "fleet-site-vars.yml")
    passwords = state["fleet_passwords"]
    with open(site_vars, "w") as fh:
        fh.write(f"kafka_mirror_bundle_dir: {MOL_HOME}/artifacts/bundle/kafka-mirror-bundle-current\n"
                 f"vault_mirror_dc2_password: {passwords['dc2']}\n"
                 f"vault_mirror_dc3_password: {passwords['dc3']}\n")
    log = os.path.join(MOL_HOME, "fleet-check.log")
    run = subprocess.run([os.path.join(repo, "molecule", "example", "site-run.sh"), log,
                          os.path.join(inventory, "hosts.yml"), overlay,
                          site_vars, os.path.join(inventory, "files", "krb5.conf"), state["hosts"],
                          "--check", "--diff"], capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    with open(log) as fh:
        out = fh.read()
    for password in passwords.values():
        assert password not in out, "a SCRAM password in the plan's output"
    # every host's flows in its mm2.properties plan
    for line in ("dc1->dc2.enabled=true", "dc2->dc1.enabled=true", "dc3->dc2.enabled=true",
                 "dc1->dc3.enabled=true"):
        assert f"+{line}" in out, f"{line} not planned"
    recap = [l for l in out.splitlines() if l.split(":")[0].strip() in FLEET_HOSTS and "failed=" in l]
    assert len(recap) == 3 and all("failed=0" in l and "unreachable=0" in l for l in recap), recap
