"""Kerberos end to end (scenario "kerberos"): the mirror role's krb5.conf, JAAS files and keytabs, against
the real MIT KDC and the two Kerberized clusters that molecule/kerberos/kerberos-realm.py runs on the
controller; km-krb-mm2 runs stock MirrorMaker 2 with a principal per cluster, km-krb-km the
kafka_mirror engine with one principal for both.

What proves that each side logged in as its own principal: the KDC's log lists the service tickets
it issued to the host's address (on km-krb-mm2 mirror-src for the source's service principal
kafka/<ip>, mirror-dst for the destination's kafka-dst/<ip>, never crosswise), and the brokers' ACLs
let mirror-src only read the source and mirror-dst only write the destination, so mirroring works
only with the right principal on each side. Records produced over GSSAPI from the controller (the
verifier's own principal) arrive on the destination in the same partitions.
"""

import hashlib
import json
import os
import re
import time
import uuid

import pytest
from krb_clients import STATE_DIR, client_conf, produce, read_mirrored

SERVICE = "kafka-mirror"
USER = "kafka-mirror"
CONF = "/etc/kafka-mirror"
KEYTABS = f"{CONF}/keytabs"
MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
SIDES = ("source", "destination")


def _mm2(host):
    return _vars(host).get("mirror_engine", "kafka_mirror") == "mirrormaker2"


def _vars(host):
    return host.ansible.get_variables()


def _main_pid(host):
    pid = int(host.check_output(f"systemctl show -p MainPID --value {SERVICE}"))
    assert pid > 0, f"{SERVICE} has no main process"
    return pid


def _principal(host, side):
    return _vars(host)[f"mirror_{side}_kerberos_principal"]


def _alias(host, side):
    """The cluster alias of a side: keytabs and JAAS files are named after it (<alias>.keytab)."""
    return _vars(host)[f"mirror_{side}_alias"]


def _cmdline(host, pid):
    return host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()


def test_runs_as_service_user_with_the_krb5_conf(krb_host):
    """The service's processes run as the service user; the JVM (MirrorMaker 2, or kafka-mirror's
    Spark driver) gets the role's krb5.conf, and so does MIT Kerberos (KRB5_CONFIG: kinit, librdkafka)."""
    host = krb_host
    svc = host.service(SERVICE)
    assert svc.is_running and svc.is_enabled
    pid = _main_pid(host)
    assert host.check_output(f"ps -o user= -p {pid}") == USER
    env = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/environ").splitlines()
    assert f"KRB5_CONFIG={CONF}/krb5.conf" in env
    if _mm2(host):
        jvm = pid
        assert MM2_MAIN in _cmdline(host, pid)
    else:
        assert f"{_vars(host).get('mirror_venv_path', '/opt/kafka-mirror/venv')}/bin/kafka-mirror" in " ".join(
            _cmdline(host, pid))
        jvm = None
        for _ in range(60):   # the Spark driver JVM, a child of kafka-mirror
            out = host.run(f"pgrep -u {USER} -x java").stdout.split()
            if out:
                jvm = int(out[0])
                break
            time.sleep(2)
        assert jvm, "no Spark driver JVM"
    assert host.check_output(f"ps -o user= -p {jvm}") == USER
    assert f"-Djava.security.krb5.conf={CONF}/krb5.conf" in " ".join(_cmdline(host, jvm))


def test_keytabs_byte_identical_and_private(krb_host, state):
    host = krb_host
    d = host.file(KEYTABS)
    assert d.is_directory and (d.user, d.group, d.mode) == (USER, USER, 0o500)
    hv = _vars(host)
    digests = set()
    for side in SIDES:
        src = hv[f"mirror_{side}_kerberos_keytab_src"].replace("{{ __mol_krb }}", STATE_DIR)
        who = os.path.basename(src)[:-len(".keytab")]
        assert state["keytabs"][who] == src
        with open(src, "rb") as fh:
            local = fh.read()
        name = f"{_alias(host, side)}.keytab"
        keytab = host.file(f"{KEYTABS}/{name}")
        assert (keytab.user, keytab.group, keytab.mode) == (USER, USER, 0o400), side
        assert keytab.size == len(local)
        assert keytab.sha256sum == hashlib.sha256(local).hexdigest(), f"{name} differs from {who}'s"
        digests.add(keytab.sha256sum)
        # readable by the service user (and root), by nobody else
        assert host.run(f"runuser -u {USER} -- head -c1 {KEYTABS}/{name}").rc == 0
        assert host.run(f"runuser -u nobody -- head -c1 {KEYTABS}/{name}").rc != 0
    separate = _principal(host, "source") != _principal(host, "destination")
    assert len(digests) == (2 if separate else 1)


def test_krb5_conf_and_jaas_rendered(krb_host, state):
    host = krb_host
    krb5 = host.file(f"{CONF}/krb5.conf")
    assert (krb5.user, krb5.group, krb5.mode) == ("root", USER, 0o644)
    with open(state["krb5_hosts_conf"]) as fh:
        assert krb5.content_string.strip() == fh.read().strip()
    assert f"kdc = {state['kdc']}" in krb5.content_string
    for side in SIDES:
        jaas = host.file(f"{CONF}/jaas-{_alias(host, side)}.conf")
        assert (jaas.user, jaas.group, jaas.mode) == (USER, USER, 0o600)
        text = jaas.content_string
        assert "com.sun.security.auth.module.Krb5LoginModule required" in text
        assert f'keyTab="{KEYTABS}/{_alias(host, side)}.keytab"' in text
        assert f'principal="{_principal(host, side)}";' in text


def test_mm2_properties_log_in_per_cluster(krb_host, state):
    host = krb_host
    hv = _vars(host)
    conf = host.file(f"{CONF}/mm2.properties")
    assert (conf.user, conf.group, conf.mode) == (USER, USER, 0o600)
    lines = conf.content_string.splitlines()
    for side, alias in (("source", hv["mirror_source_alias"]), ("destination", hv["mirror_destination_alias"])):
        assert f"{alias}.bootstrap.servers={state['bootstrap'][side]}" in lines
        assert f"{alias}.security.protocol=SASL_PLAINTEXT" in lines
        assert f"{alias}.sasl.mechanism=GSSAPI" in lines
        assert f"{alias}.sasl.kerberos.service.name={state['services'][side]}" in lines
        jaas = next(v for v in lines if v.startswith(f"{alias}.sasl.jaas.config="))
        assert f'keyTab="{KEYTABS}/{alias}.keytab"' in jaas
        assert f'principal="{_principal(host, side)}";' in jaas
    if _mm2(host):  # the separate-principal host
        assert hv["mirror_source_kerberos_principal"] != hv["mirror_destination_kerberos_principal"]


def test_no_key_material_outside_the_keytabs(krb_host, state):
    """The keytabs' keys (hex, from klist -K on the controller) appear in no rendered file."""
    host = krb_host
    with open(os.path.join(STATE_DIR, "keys.json")) as fh:
        keys = json.load(fh)
    assert keys
    text = host.check_output(f"cat {CONF}/*.properties {CONF}/*.conf {CONF}/*.env").lower()
    assert not [k for k in keys if k.lower() in text]


def test_records_mirrored_over_kerberos_with_partitions(krb_host, state, krb_env):
    """Records produced over GSSAPI (the verifier's principal, from the controller) to chosen
    partitions of the source topics appear on src.<topic> in the same partitions, read over GSSAPI;
    the records seeded before MirrorMaker 2 started are there too."""
    alias = _vars(krb_host)["mirror_source_alias"]
    marker = uuid.uuid4().hex
    partitions = {"molecule.orders": 3, "molecule.payments": 2}
    sent = {}
    for i in range(30):
        topic = "molecule.orders" if i % 2 else "molecule.payments"
        sent[(topic, f"{marker}-{i}".encode())] = i % partitions[topic]
    produce(state, krb_env, sent)
    # seeded by kerberos-realm.py: seed-<i> into partition i % partitions
    for i in range(60):
        topic = "molecule.orders" if i % 2 else "molecule.payments"
        sent[(topic, b"seed-%d" % i)] = i % partitions[topic]
    want = {(f"{alias}.{t}", k): p for (t, k), p in sent.items()}
    got = read_mirrored(state, krb_env, sorted({t for t, _ in want}), want, 180)
    missing = {}
    for (topic, key), partition in want.items():
        if (topic, key) not in got:
            kind = "seeded" if key.startswith(b"seed-") else "new"
            missing[(topic, partition, kind)] = missing.get((topic, partition, kind), 0) + 1
    if missing:
        logs = krb_host.run(f"journalctl -u {SERVICE} --no-pager -o cat | grep -E 'WARN|ERROR|Exception' | tail -40")
        pytest.fail(f"{sum(missing.values())}/{len(want)} records not mirrored (topic, partition, kind: count): "
                    f"{missing}\nwarnings/errors of {SERVICE}:\n{logs.stdout}")
    assert got == want


def _visible_topics(state, tmp, side, who):
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(client_conf(state, tmp, side, who))
    topics = set(admin.list_topics(timeout=30).topics)
    del admin
    return topics


def test_acls_tell_the_principals_apart(state, krb_env):
    """The set-up that makes the mirroring test meaningful: mirror-src sees the source topics and not
    the mirrored ones on the destination, mirror-dst the other way round."""
    assert {"molecule.orders", "molecule.payments"} <= _visible_topics(state, krb_env, "source", "mirror-src")
    assert not {t for t in _visible_topics(state, krb_env, "source", "mirror-dst") if t.startswith("molecule.")}
    assert "src.molecule.orders" in _visible_topics(state, krb_env, "destination", "mirror-dst")
    assert not {t for t in _visible_topics(state, krb_env, "destination", "mirror-src") if t.startswith("src.")}


REQUEST = re.compile(r"krb5kdc\[\d+\]\(info\): (AS_REQ|TGS_REQ) \(.*?\) ([0-9.]+): (\w+): ")
ISSUED = re.compile(r", (\S+) for (\S+)$")


def test_kdc_issued_each_side_its_own_tickets(krb_host, state):
    """The KDC's log: from the host's address, the source's principal got service tickets for the
    source's service principal, the destination's for the destination's, and nothing else (with
    separate principals: mirror-src never for the destination, mirror-dst never for the source); no
    failed ticket request (a service principal the KDC does not know, e.g. from a canonicalized
    host name)."""
    host = krb_host
    ip = _vars(host)["ansible_host"]
    realm = state["realm"]
    bridge = state["bootstrap"]["source"].rsplit(":", 1)[0]
    services = {side: f"{state['services'][side]}/{bridge}@{realm}" for side in SIDES}
    issued, failed = set(), []
    with open(state["kdc_log"]) as fh:
        for line in fh:
            m = REQUEST.search(line)
            if not m or m.group(2) != ip:
                continue
            if m.group(3) == "ISSUE":
                issued.add((m.group(1), *ISSUED.search(line.rstrip()).groups()))
            elif m.group(1) == "TGS_REQ":
                failed.append(line.strip())
    tgs = {(client, server) for kind, client, server in issued if kind == "TGS_REQ"}
    src, dst = _principal(host, "source"), _principal(host, "destination")
    assert (src, services["source"]) in tgs, tgs
    assert (dst, services["destination"]) in tgs, tgs
    assert tgs <= {(src, services["source"]), (dst, services["destination"])}, tgs
    assert ("AS_REQ", src, f"krbtgt/{realm}@{realm}") in issued
    assert ("AS_REQ", dst, f"krbtgt/{realm}@{realm}") in issued
    assert not failed


def test_no_authentication_or_authorization_errors(krb_host):
    host = krb_host
    out = host.run(f"journalctl -u {SERVICE} --no-pager -o cat").stdout
    if _mm2(host):
        assert "Kafka MirrorMaker started" in out
    for error in ("SaslAuthenticationException", "AuthorizationException", "AUTHORIZATION_FAILED",
                  "GSSException", "LoginException", "KerberosLoginError", "Kerberos login failed",
                  "another principal"):
        assert error not in out


def test_kafka_mirror_engine_has_gssapi_client(krb_host):
    """kafka_mirror engine: confluent-kafka is the GSSAPI build (mirror_pip_extra_wheels), kinit and
    the SASL GSSAPI plugin are installed (the role's package task)."""
    host = krb_host
    if _mm2(host):
        pytest.skip("stock MirrorMaker 2: Java clients only")
    venv = _vars(host).get("mirror_venv_path", "/opt/kafka-mirror/venv")
    version = host.check_output(
        f"{venv}/bin/python -c \"import importlib.metadata as m; print(m.version('confluent-kafka'))\"")
    assert version.endswith("+gssapi")
    for pkg in ("krb5-user", "libsasl2-modules-gssapi-mit"):
        assert host.package(pkg).is_installed
