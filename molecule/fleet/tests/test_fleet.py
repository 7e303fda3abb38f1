"""The "fleet" scenario: three hosts, one topology, several mirror instances per host.

km-fleet1 runs A->B and B->A (active-active) in instance "aa" on the Spark cluster (master there,
worker km-fleet3, Kerberos on A); km-fleet2 aggregates A and C into B with instances "a" and "c";
km-fleet1's instance "c" runs km-fleet2's C->B again: one of the two writes it, the other stands by.
Fleet-wide checks run once (on km-fleet1's turn)."""

import ast
import os
import shlex
import subprocess
import sys
import threading
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "_shared"))

from krb_clients import client_conf, krb5_env, realm_state  # noqa: E402

BRIDGE_IP = os.environ.get("MOL_BRIDGE_IP", "10.77.0.1")
B = f"{BRIDGE_IP}:19192"
C = f"{BRIDGE_IP}:19092"
SHARED_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "_shared", "tests")
# host -> instance -> (metrics port, JMX exporter port, flows)
INSTANCES = {
    "km-fleet1": {"aa": (9405, 9404, ["A->B", "B->A"]), "c": (9407, 9406, ["C->B"])},
    "km-fleet2": {"a": (9405, 9404, ["A->B"]), "c": (9407, 9406, ["C->B"])},
}
USER = "kafka-mirror"
# C->B runs on both hosts (instance c): one writes, the other stands by
STANDBY_SET = {"km-fleet1": "10.77.0.31", "km-fleet2": "10.77.0.32"}
C_TO_B_STATUS = 9407


def _name(host):
    return host.backend.get_hostname()


def _main_pid(host, unit):
    return int(host.check_output(f"systemctl show -p MainPID --value {unit}"))


@pytest.fixture(scope="module")
def a_state():
    return realm_state()


@pytest.fixture(scope="module")
def krb_tmp(a_state):
    """Controller-side Kerberos clients of cluster A use the test realm and private caches."""
    with krb5_env(a_state, prefix="molecule-fleet-krb5-") as tmp:
        yield tmp


def _a_conf(state, tmp, who, **extra):
    return client_conf(state, tmp, "source", who, **extra)


def _read(conf, want, timeout):
    """Consume the topics of ``want`` ({(topic, key): partition}) until every key arrived."""
    from confluent_kafka import Consumer
    consumer = Consumer({**conf, "group.id": f"molecule-fleet-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000})
    consumer.subscribe(sorted({t for t, _ in want}))
    got = {}
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and len(got) < len(want):
            msg = consumer.poll(1.0)
            if msg is None or msg.error() or (msg.topic(), msg.key()) not in want:
                continue
            got[(msg.topic(), msg.key())] = msg.partition()
    finally:
        consumer.close()
    return got


def test_instances_run_as_their_own_units(host):
    """Every instance is a kafka-mirror@<name> unit of its own (no plain kafka-mirror unit), with its
    own configuration, state and log directories, flows and ports, ready on its /health/ready."""
    name = _name(host)
    if name not in INSTANCES:
        pytest.skip("Spark worker only")
    assert not host.file("/etc/systemd/system/kafka-mirror.service").exists
    units = host.check_output("ls /etc/systemd/system").split()
    assert sorted(u for u in units if u.startswith("kafka-mirror")) == sorted(f"kafka-mirror@{i}.service" for i in INSTANCES[name])
    pids = set()
    for inst, (metrics, jmx, flows) in INSTANCES[name].items():
        unit = f"kafka-mirror@{inst}"
        assert host.service(unit).is_running and host.service(unit).is_enabled
        pids.add(_main_pid(host, unit))
        conf = host.file(f"/etc/kafka-mirror/{inst}/mm2.properties")
        assert (conf.user, conf.mode) == ("kafka-mirror", 0o600)
        text = conf.content_string
        for flow in flows:
            assert f"{flow}.enabled=true" in text
        assert f"mirror.metrics.port={metrics}" in text
        for d in (f"/var/lib/kafka-mirror/{inst}", f"/var/log/kafka-mirror/{inst}"):
            assert (host.file(d).is_directory, host.file(d).user) == (True, USER), d
        cmd = host.check_output(f"systemctl show -p ExecStart --value {unit}")
        assert f"/etc/kafka-mirror/{inst}/mm2.properties" in cmd and f"/var/lib/kafka-mirror/{inst}" in cmd
        assert f"{jmx}:/etc/kafka-mirror/{inst}/jmx-exporter.yml" in cmd
        ready = ""
        for _ in range(60):
            ready = host.run(f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{metrics}/health/ready").stdout
            if ready == "200":
                break
            time.sleep(2)
        assert ready == "200", f"{unit} not ready on {metrics}"
    assert len(pids) == len(INSTANCES[name])


def test_spark_worker_has_the_instance_kerberos_files(host):
    """km-fleet3 runs km-fleet1's executors: it has the instance's krb5.conf, JAAS file and keytab of
    cluster A, owned by the Spark worker's user."""
    if _name(host) != "km-fleet3":
        pytest.skip("the Spark worker")
    keytab = host.file("/etc/kafka-mirror/aa/keytabs/A.keytab")
    assert keytab.exists and keytab.mode == 0o400 and keytab.user == "spark"
    assert host.file("/etc/kafka-mirror/aa/krb5.conf").contains("KAFKA-MIRROR.TEST")
    assert host.file("/etc/kafka-mirror/aa/jaas-A.conf").exists
    assert host.run("pgrep -u spark -f CoarseGrainedExecutorBackend").rc == 0


def test_records_of_every_flow(host, a_state, krb_tmp):
    """A->B (km-fleet1 and km-fleet2, each its topics), B->A (km-fleet1) and C->B (km-fleet2): records
    produced to chosen partitions arrive in the same partitions of <source alias>.<topic>."""
    if _name(host) != "km-fleet1":
        pytest.skip("fleet-wide, checked once")
    from confluent_kafka import Producer
    marker = uuid.uuid4().hex
    plan = {"A": {"molecule.orders": 3, "molecule.payments": 2}, "B": {"fleet.fromb": 2},
            "C": {"molecule.orders": 3, "molecule.events": 2}}
    sent = {}
    for source, topics in plan.items():
        conf = _a_conf(a_state, krb_tmp, "molecule-client") if source == "A" else {"bootstrap.servers": B if source == "B" else C}
        producer = Producer(conf)
        for topic, parts in topics.items():
            for i in range(20):
                key = f"{marker}-{i}".encode()
                producer.produce(topic, key=key, value=b"fleet", partition=i % parts)
                sent[(source, topic, key)] = i % parts
        assert producer.flush(60) == 0, f"records not delivered to {source}"
    on_b = {(f"{s}.{t}", k): p for (s, t, k), p in sent.items() if s != "B"}
    on_a = {(f"B.{t}", k): p for (s, t, k), p in sent.items() if s == "B"}
    got_b = _read({"bootstrap.servers": B}, on_b, 240)
    assert got_b == on_b, f"{len(got_b)}/{len(on_b)} on B"
    got_a = _read(_a_conf(a_state, krb_tmp, "mirror"), on_a, 240)
    assert got_a == on_a, f"{len(got_a)}/{len(on_a)} on A"


def test_special_characters_reach_java_and_the_jmx_password_works(host, tmp_path):
    """Instance c's property value with \\ " # = : ! $ { and non-ASCII is read back by Java's
    Properties.load(); the JMX exporters of km-fleet2 take the password with \\ " # = : ! $ { and
    refuse requests without it."""
    if _name(host) != "km-fleet2":
        pytest.skip("km-fleet2's instances")
    import shutil
    hv = host.ansible.get_variables()
    key = "x.kafka-mirror.escape.check"
    want = hv["mirror_instances"][1]["custom_properties"][key]
    with open(os.path.join(SHARED_TESTS, "test_mirror.py"), encoding="utf-8") as fh:
        reader = next(n.value.value for n in ast.parse(fh.read()).body
                      if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "PROPERTY_READER")
    source = tmp_path / "PropertyReadBack.java"
    source.write_text(reader, encoding="utf-8")
    javac = shutil.which("javac")
    assert javac, "the controller needs a JDK (javac) to build the read-back probe"
    subprocess.run([javac, "--release", "17", "-d", str(tmp_path), str(source)], check=True)
    host.ansible("copy", f"src={tmp_path / 'PropertyReadBack.class'} dest=/tmp/ mode=0644", check=False)
    out = host.check_output(f"java -cp /tmp PropertyReadBack /etc/kafka-mirror/c/mm2.properties {key}")
    assert bytes.fromhex(out.strip()) == want.encode("utf-8")
    assert not host.file("/etc/kafka-mirror/a/mm2.properties").contains("escape.check")
    user, password = hv["mirror_jmx_exporter_basic_auth_username"], hv["mirror_jmx_exporter_basic_auth_password"]
    for _, jmx, _ in INSTANCES["km-fleet2"].values():
        url = f"http://127.0.0.1:{jmx}/metrics"
        code = host.run(f"curl -s -o /dev/null -w '%{{http_code}}' {url}").stdout
        assert code == "401", (jmx, code)
        out = host.run(f"curl -sf -u {shlex.quote(user + ':' + password)} {url}").stdout
        assert "jvm_" in out or "java_lang_" in out, jmx


def _status(address, port=C_TO_B_STATUS):
    """An instance's /status, asked from the controller (None: it does not answer)."""
    import json
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://{address}:{port}/status", timeout=5) as answer:
            return json.loads(answer.read())
    except (OSError, ValueError):
        return None


def _roles():
    """host -> C->B's role in its instance c (None: not answering)."""
    out = {}
    for name, address in STANDBY_SET.items():
        status = _status(address)
        out[name] = None if status is None else status["flows"].get("C->B", {}).get("role")
    return out


def _ansible(inventory, host, *args):
    return subprocess.run(["ansible", "-i", inventory, host, "-b", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def _count(conf, topic, keys, timeout):
    """How many times each of ``keys`` is in ``topic`` (until every key arrived and the topic's end
    was read once more)."""
    from confluent_kafka import Consumer
    consumer = Consumer({**conf, "group.id": f"molecule-fleet-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.subscribe([topic])
    counts = {}
    deadline = time.time() + timeout
    quiet = 0
    try:
        while time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                quiet += 1
                if len(counts) == len(keys) and quiet > 5:
                    break
                continue
            quiet = 0
            if msg.key() in keys:
                counts[msg.key()] = counts.get(msg.key(), 0) + 1
    finally:
        consumer.close()
    return counts


def test_a_flow_on_two_hosts_has_one_writer_that_a_standby_replaces(host):
    """C->B on km-fleet1 and km-fleet2 (instance c, the same lag group): one writes it, the other
    stands by (their /status say so). The writer's host loses the mirror (kill -9 of every process
    of its unit) while records flow: the standby takes the flow over; every record is on B once."""
    if _name(host) != "km-fleet1":
        pytest.skip("fleet-wide, checked once")
    from confluent_kafka import Producer
    deadline = time.time() + 180
    roles = _roles()
    while sorted(r for r in roles.values() if r) != ["active", "standby"] and time.time() < deadline:
        time.sleep(2)
        roles = _roles()
    assert sorted(roles.values()) == ["active", "standby"], roles
    writer = next(h for h, r in roles.items() if r == "active")
    standby = next(h for h, r in roles.items() if r == "standby")
    lease = _status(STANDBY_SET[standby])["flows"]["C->B"]["lease"]
    assert lease["holder"].startswith(writer), lease
    assert len(lease["members_live"]) == 2, lease
    marker = uuid.uuid4().hex
    sent, stop = [], threading.Event()

    def produce():
        producer = Producer({"bootstrap.servers": C, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            key = f"{marker}-{i}".encode()
            producer.produce("molecule.events", key=key, value=b"r", partition=i % 2)
            sent.append(key)
            i += 1
            producer.poll(0)
            time.sleep(0.01)
        assert producer.flush(30) == 0

    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    thread = threading.Thread(target=produce)
    thread.start()
    try:
        time.sleep(5)
        killed = _ansible(inventory, writer, "-m", "ansible.builtin.command",
                          "-a", "systemctl kill --signal=SIGKILL kafka-mirror@c.service")
        began = time.time()
        assert killed.returncode == 0, killed.stdout + killed.stderr
        while time.time() < began + 120 and _roles()[standby] != "active":
            time.sleep(0.5)
        takeover = time.time() - began
        assert _roles()[standby] == "active", _roles()
        time.sleep(5)
    finally:
        stop.set()
        thread.join()
    counts = _count({"bootstrap.servers": B}, "C.molecule.events", set(sent), 240)
    lost = sum(1 for k in sent if k not in counts)
    duplicates = sum(n - 1 for n in counts.values())
    print(f"C->B writer on {writer} killed (kill -9 of its unit): {standby} took over after {takeover:.1f} s; "
          f"{len(sent)} records, {lost} lost, {duplicates} duplicates")
    assert (lost, duplicates) == (0, 0), (lost, duplicates)
    # systemd starts the killed instance again: it stands by (or takes the lease back, if free)
    deadline = time.time() + 240
    while time.time() < deadline and sorted(r for r in _roles().values() if r) != ["active", "standby"]:
        time.sleep(2)
    assert sorted(_roles().values()) == ["active", "standby"], _roles()


def test_rolling_restart_during_produce_loses_nothing(host, a_state, krb_tmp):
    """kafka.mirror.rolling_restart (serial 1) restarts every instance of every host, one after the
    other, each waited for on its own /health/ready, while records flow C->B (km-fleet2, instance c)
    and B->A (km-fleet1): every record arrives, in its partition."""
    if _name(host) != "km-fleet1":
        pytest.skip("fleet-wide, checked once")
    from confluent_kafka import Producer
    marker = uuid.uuid4().hex
    sent, stop = {}, threading.Event()

    def produce():
        producers = {"C": Producer({"bootstrap.servers": C, "linger.ms": 5}),
                     "B": Producer({"bootstrap.servers": B, "linger.ms": 5})}
        i = 0
        while not stop.is_set():
            key = f"{marker}-{i}".encode()
            producers["C"].produce("molecule.orders", key=key, value=b"r", partition=i % 3)
            sent[("C.molecule.orders", key)] = i % 3
            producers["B"].produce("fleet.fromb", key=key, value=b"r", partition=i % 2)
            sent[("B.fleet.fromb", key)] = i % 2
            i += 1
            for p in producers.values():
                p.poll(0)
            time.sleep(0.02)
        for p in producers.values():
            assert p.flush(30) == 0

    roles = _roles()
    assert sorted(roles.values()) == ["active", "standby"], roles
    thread = threading.Thread(target=produce)
    thread.start()
    try:
        time.sleep(2)
        inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
        run = subprocess.run(["ansible-playbook", "-i", inventory, "kafka.mirror.rolling_restart",
                              "-e", "kafka_mirror_restart_pause=2"],
                             capture_output=True, text=True, timeout=900, check=False)
        time.sleep(2)
    finally:
        stop.set()
        thread.join()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    for h, insts in INSTANCES.items():
        for inst, (metrics, _, _) in insts.items():
            assert f"{h}: kafka-mirror@{inst} restarted; ready: http://127.0.0.1:{metrics}/health/ready answered 200" \
                in run.stdout, run.stdout[-3000:]
    # serial 1: km-fleet1's instance was restarted and ready before km-fleet2's
    assert run.stdout.index("km-fleet1: kafka-mirror@aa restarted") < run.stdout.index("km-fleet2: kafka-mirror@a restarted")
    # standbys first: C->B's standby instance restarted before every writer, its writer after
    standby = next(h for h, r in roles.items() if r == "standby")
    writer = next(h for h, r in roles.items() if r == "active")
    first_writer = min(run.stdout.index(f"{h}: kafka-mirror@{i} restarted")
                       for h, i in (("km-fleet1", "aa"), ("km-fleet2", "a"), (writer, "c")))
    assert run.stdout.index(f"{standby}: kafka-mirror@c restarted") < first_writer, run.stdout[-3000:]
    assert len(sent) > 200
    on_b = {k: p for k, p in sent.items() if k[0].startswith("C.")}
    on_a = {k: p for k, p in sent.items() if k[0].startswith("B.")}
    got_b = _read({"bootstrap.servers": B}, on_b, 240)
    assert len(got_b) == len(on_b), f"C->B: {len(got_b)}/{len(on_b)} records across the restart"
    assert got_b == on_b
    got_a = _read(_a_conf(a_state, krb_tmp, "mirror"), on_a, 240)
    assert len(got_a) == len(on_a), f"B->A: {len(got_a)}/{len(on_a)} records across the restart"
    assert got_a == on_a
