"""Upgrade and rollback of the kafka_mirror engine by release bundle (issue 29, "Day-2 operations"),
on km-krb-km, under continuous produce over GSSAPI, between two releases of different code.

The scenario's bundle is this tree's, version N (pyproject.toml). The previous release, N-1 (the
newest release of changelogs/changelog.yaml below N), is built by the documented command
(scripts/build-bundle.sh) from its own tree: its git tag (`v<N-1>`), exported with `git archive`.
kafka.mirror.site pointed at N-1's bundle is refused (an older kafka-mirror) and changes nothing;
with mirror_allow_downgrade=true the host goes to N-1 (the documented rollback), and then back to
N's bundle (the upgrade from N-1 to N). Each of the two runs plans the change per host
(`kafka-mirror N -> N-1, pyspark ..., confluent-kafka ...`), stops the instance, archives its state to
/var/lib/kafka-mirror-snapshots and starts it on the other installation, waited for like any
rolling restart; every record produced meanwhile is on the target exactly once."""

import json
import os
import shutil
import subprocess
import threading
import time
import uuid

import pytest
import yaml
from krb_clients import MOL_HOME, client_conf, read_mirrored
from packaging.version import Version

REPO = os.environ.get("MOLECULE_PROJECT_DIRECTORY", "")
SNAPSHOTS = "/var/lib/kafka-mirror-snapshots"
VENV = "/opt/kafka-mirror/venv"
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


def _previous_release(version):
    """The newest release of the changelog before ``version`` (this tree's)."""
    with open(os.path.join(REPO, "changelogs", "changelog.yaml"), encoding="utf-8") as fh:
        releases = yaml.safe_load(fh)["releases"]
    older = sorted((Version(v) for v in releases if Version(v) < Version(version)), reverse=True)
    assert older, f"changelogs/changelog.yaml has no release before {version}"
    return str(older[0])


def _build_release(release, out):
    """Release ``release``'s bundle, built by its own scripts/build-bundle.sh from its own tree (its tag,
    exported with git archive); returns the bundle's directory."""
    tag = f"v{release}"
    known = subprocess.run(["git", "-C", REPO, "rev-parse", "--verify", "--quiet", f"{tag}^{{commit}}"],
                           capture_output=True, text=True, check=False)
    assert known.returncode == 0, f"no tag {tag} for release {release} in {REPO}: fetch the tags (git fetch --tags)"
    tree = os.path.join(out, f"kafka-mirror-{release}")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    subprocess.run(f"git -C '{REPO}' archive --format=tar {tag} | tar -x -C '{tree}'", shell=True, check=True)
    # what that build would make again from the same inputs, taken from this tree's build (hard links):
    # the wheelhouse (its build script reuses it when the wheel's requirements are the same, else it
    # builds its own) and, when the JVM modules' sources are the same, their jars
    cache = os.path.join(REPO, "build", "bundle-cache", "wheelhouse")
    if os.path.isdir(cache):
        os.makedirs(os.path.join(tree, "build", "bundle-cache"))
        shutil.copytree(cache, os.path.join(tree, "build", "bundle-cache", "wheelhouse"), copy_function=os.link)
    jvm_same = subprocess.run(["git", "-C", REPO, "diff", "--quiet", tag, "HEAD", "--", "jvm"], check=False)
    jars = os.path.join(REPO, "jvm", "spark-connector", "target", "lib")
    if jvm_same.returncode == 0 and os.path.isdir(jars):
        shutil.copytree(jars, os.path.join(tree, "jvm", "spark-connector", "target", "lib"), copy_function=os.link)
    began = time.monotonic()
    build = subprocess.run([os.path.join(tree, "scripts", "build-bundle.sh"), "--out", out],
                           capture_output=True, text=True, timeout=1500, check=False)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    print(f"release {release}'s bundle built from {tag} in {time.monotonic() - began:.0f} s")
    bundle = os.path.join(out, f"kafka-mirror-bundle-{release}")
    with open(os.path.join(bundle, "bundle.json")) as fh:
        assert json.load(fh)["version"] == release
    return bundle


def test_rollback_to_the_previous_release_then_upgrade_by_bundle_under_produce(krb_host, state, krb_env):
    host = krb_host
    hv = host.ansible.get_variables()
    if hv.get("mirror_engine", "kafka_mirror") != "kafka_mirror":
        pytest.skip("upgrades of the kafka_mirror engine")
    name = hv["inventory_hostname"]
    current = os.path.realpath(os.path.join(MOL_HOME, "artifacts", "bundle", "kafka-mirror-bundle-current"))
    with open(os.path.join(current, "bundle.json")) as fh:
        version = json.load(fh)["version"]
    previous = _previous_release(version)
    old = _build_release(previous, os.path.join(MOL_HOME, "artifacts", "previous-release"))
    assert _installed(host) == version
    before = _snapshots(host)

    # N-1's bundle: the preflight refuses the older version, nothing changes
    pid = host.check_output("systemctl show -p MainPID --value kafka-mirror")
    refused = _site(name, "-e", f"kafka_mirror_bundle_dir={old}")
    assert refused.returncode != 0
    # the task's failure goes to stderr ([ERROR]: Task failed: ...)
    assert (f"{name} runs kafka-mirror {version}; kafka_mirror-{previous}-py3-none-any.whl is older ({previous}): "
            "for a rollback to it set mirror_allow_downgrade=true") in refused.stdout + refused.stderr, \
        refused.stdout[-2000:] + refused.stderr[-2000:]
    assert _installed(host) == version
    assert host.check_output("systemctl show -p MainPID --value kafka-mirror") == pid

    # the rollback to N-1: planned per host, the instance stopped, its state archived, started on N-1
    rollback, sent = _site_under_produce(name, state, krb_env, "-e", f"kafka_mirror_bundle_dir={old}",
                                         "-e", "mirror_allow_downgrade=true")
    assert rollback.returncode == 0, rollback.stdout[-4000:] + rollback.stderr[-2000:]
    assert f"{name}: kafka-mirror {version} -> {previous}, pyspark " in rollback.stdout, rollback.stdout[-4000:]
    assert f'"msg": "{name}: kafka-mirror restarted; ' in rollback.stdout
    assert _installed(host) == previous
    taken = [s for s in _snapshots(host) if s not in before]
    assert len(taken) == 1 and taken[0].startswith(f"kafka-mirror-{version}-"), taken
    members = host.check_output(f"tar -tzf {SNAPSHOTS}/{taken[0]}").split()
    assert any(m.endswith("/target-ends.json") for m in members), members[:40]
    assert not [m for m in members if m.startswith(("./spark-local/", "./class-data/"))]
    assert len(sent) > 300
    _assert_each_once(host, state, krb_env, sent)

    # the upgrade from N-1 to N (the scenario's bundle again): the same path, a second snapshot
    upgrade, sent = _site_under_produce(name, state, krb_env)
    assert upgrade.returncode == 0, upgrade.stdout[-4000:] + upgrade.stderr[-2000:]
    assert f"{name}: kafka-mirror {previous} -> {version}, pyspark " in upgrade.stdout, upgrade.stdout[-4000:]
    assert _installed(host) == version
    taken = [s for s in _snapshots(host) if s not in before]
    assert len(taken) == 2 and any(s.startswith(f"kafka-mirror-{previous}-") for s in taken), taken
    assert len(sent) > 300
    _assert_each_once(host, state, krb_env, sent)
