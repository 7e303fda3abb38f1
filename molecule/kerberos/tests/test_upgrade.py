"""Upgrade and rollback of the kafka_mirror engine by release bundle (issue 29, "Day-2 operations"),
on km-krb-km, under continuous produce over GSSAPI.

The release after the installed one is built by the documented command (scripts/build-bundle.sh
--version): the scenario's bundle is version V, the new one V.post1. kafka.mirror.site pointed at it
plans the upgrade per host (`kafka-mirror V -> V.post1, pyspark ..., confluent-kafka ...`), stops the
instance, archives its state to /var/lib/kafka-mirror-snapshots and starts it on the new
installation, waited for like any rolling restart; every record produced meanwhile is on the target
exactly once. Pointed back at V's bundle, the preflight refuses the older version and changes nothing;
with mirror_allow_downgrade=true the rollback runs the same way (a second snapshot, 0 lost, 0
duplicates): in the full form (KAFKA_MIRROR_FULL=1) only, as it is the upgrade's path again and a
site run of its own (the CI form's time). Both bundles hold the same code: what is tested is the upgrade path, not a change of
the engine."""

import json
import os
import subprocess
import threading
import time
import uuid

import pytest
from krb_clients import MOL_HOME, client_conf, read_mirrored

REPO = os.environ.get("MOLECULE_PROJECT_DIRECTORY", "")
SNAPSHOTS = "/var/lib/kafka-mirror-snapshots"
VENV = "/opt/kafka-mirror/venv"
TOPIC, PARTITIONS = "molecule.orders", 3
FULL = os.environ.get("KAFKA_MIRROR_FULL", "0") not in ("", "0")


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


def _installed(host):
    return host.check_output(f"{VENV}/bin/python -c 'import kafka_mirror; print(kafka_mirror.__version__)'").strip()


def _snapshots(host):
    return sorted(host.check_output(f"ls -1 {SNAPSHOTS}").split())


def _assert_each_once(host, state, tmp, sent):
    alias = host.ansible.get_variables()["mirror_source_alias"]
    want = {(f"{alias}.{topic}", key): partition for (topic, key), partition in sent.items()}
    copies = {}
    got = read_mirrored(state, tmp, sorted({t for t, _ in want}), want, 300, copies=copies)
    assert len(got) == len(want), f"{len(want) - len(got)}/{len(want)} records not mirrored"
    assert got == want, "records in other partitions"
    twice = {key: n for key, n in copies.items() if n > 1}
    assert not twice, f"{len(twice)} records on the target more than once"


def test_upgrade_then_rollback_by_bundle_under_produce(krb_host, state, krb_env):
    host = krb_host
    hv = host.ansible.get_variables()
    if hv.get("mirror_engine", "kafka_mirror") != "kafka_mirror":
        pytest.skip("upgrades of the kafka_mirror engine")
    name = hv["inventory_hostname"]
    current = os.path.realpath(os.path.join(MOL_HOME, "artifacts", "bundle", "kafka-mirror-bundle-current"))
    with open(os.path.join(current, "bundle.json")) as fh:
        version = json.load(fh)["version"]
    new_version = f"{version}.post1"
    out = os.path.join(MOL_HOME, "artifacts", "upgrade-bundle")
    build = subprocess.run([os.path.join(REPO, "scripts", "build-bundle.sh"), "--out", out, "--version", new_version],
                           capture_output=True, text=True, timeout=1200, check=False)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    new = os.path.join(out, f"kafka-mirror-bundle-{new_version}")
    assert _installed(host) == version
    before = _snapshots(host)

    # the upgrade: planned per host, the instance stopped, its state archived, started on V.post1
    upgrade, sent = _site_under_produce(name, state, krb_env, "-e", f"kafka_mirror_bundle_dir={new}")
    assert upgrade.returncode == 0, upgrade.stdout[-4000:] + upgrade.stderr[-2000:]
    assert f"{name}: kafka-mirror {version} -> {new_version}, pyspark " in upgrade.stdout, upgrade.stdout[-4000:]
    assert f'"msg": "{name}: kafka-mirror restarted; ' in upgrade.stdout
    assert _installed(host) == new_version
    taken = [s for s in _snapshots(host) if s not in before]
    assert len(taken) == 1 and taken[0].startswith(f"kafka-mirror-{version}-"), taken
    members = host.check_output(f"tar -tzf {SNAPSHOTS}/{taken[0]}").split()
    assert any(m.endswith("/target-ends.json") for m in members), members[:40]
    assert not [m for m in members if m.startswith(("./spark-local/", "./class-data/"))]
    assert len(sent) > 300
    _assert_each_once(host, state, krb_env, sent)

    # back to V's bundle: the preflight refuses the older version, nothing changes
    pid = host.check_output("systemctl show -p MainPID --value kafka-mirror")
    refused = _site(name)
    assert refused.returncode != 0
    # the task's failure goes to stderr ([ERROR]: Task failed: ...)
    assert (f"{name} runs kafka-mirror {new_version}; kafka_mirror-{version}-py3-none-any.whl is older ({version}): "
            "for a rollback to it set mirror_allow_downgrade=true") in refused.stdout + refused.stderr, \
        refused.stdout[-2000:] + refused.stderr[-2000:]
    assert _installed(host) == new_version
    assert host.check_output("systemctl show -p MainPID --value kafka-mirror") == pid

    # the rollback: allowed, the same path as the upgrade (its own site run: the full form only,
    # KAFKA_MIRROR_FULL=1; the CI form ends with the refusal above)
    if not FULL:
        return
    rollback, sent = _site_under_produce(name, state, krb_env, "-e", "mirror_allow_downgrade=true")
    assert rollback.returncode == 0, rollback.stdout[-4000:] + rollback.stderr[-2000:]
    assert f"{name}: kafka-mirror {new_version} -> {version}, pyspark " in rollback.stdout, rollback.stdout[-4000:]
    assert _installed(host) == version
    taken = [s for s in _snapshots(host) if s not in before]
    assert len(taken) == 2 and any(s.startswith(f"kafka-mirror-{new_version}-") for s in taken), taken
    _assert_each_once(host, state, krb_env, sent)
