#!/usr/bin/env python3
"""Controller side of the Molecule scenario "kerberos": a real MIT Kerberos realm and two Kerberized
single-node Kafka clusters on the bridge address, reachable by the test hosts.

    kerberos-realm.py start STATE_DIR BRIDGE_IP   start in the background (idempotent); wait until ready
    kerberos-realm.py stop  STATE_DIR             SIGTERM to the recorded PID, wait, remove STATE_DIR
    kerberos-realm.py serve STATE_DIR BRIDGE_IP   (what `start` runs) in the foreground until SIGTERM

The KDC (krb5kdc -n from kafka_mirror_testing.localkdc, realm KAFKA-MIRROR.TEST) listens on BRIDGE_IP
(free TCP/UDP ports). The two brokers have a SASL_PLAINTEXT GSSAPI listener on BRIDGE_IP
(source 19492, destination 19592), advertised as that IP address, and a PLAINTEXT listener on
127.0.0.1 only (set-up here; never reachable by the hosts). Service principals: kafka/BRIDGE_IP on
the source and kafka-dst/BRIDGE_IP on the destination (another service name, so the KDC log tells
which cluster a ticket was for). An IP address works as the principal's host name because nothing
canonicalizes it: krb5.conf says rdns = false / dns_canonicalize_hostname = false (MIT, librdkafka),
and the Java clients' reverse lookup of BRIDGE_IP finds no name on the test hosts (no DNS there), so
they keep the literal.

An ACL authorizer makes each client principal good for its own side only:
- mirror-src: read-only on the source (describe + read topics, describe groups and the cluster);
- mirror-dst: on the destination, the mirrored topics (src.*), MirrorMaker 2's internal topics
  (mm2-*, heartbeats) and groups, kafka-mirror's leases (topic kafka-mirror.leases, transactional
  IDs kafka-mirror.lease.*), describe the cluster;
- mirror: everything on both (one principal for both sides), kafka-mirror's leases included;
- molecule-client: the verifier's own client: writes molecule.* on the source, reads src.molecule.*
  and src2.molecule.* on the destination.
A mirror that presented the wrong principal on a side would fail. Topics molecule.orders (3
partitions) and molecule.payments (2) are created on the source with a few records.

STATE_DIR gets: kdc/ (the realm: krb5.conf for the controller, krb5kdc.log), keytabs/NAME.keytab,
krb5-hosts.conf (the krb5.conf the hosts get), keys.json (hex key material of the keytabs, to check
that it leaks nowhere), state.json (written last: ports, principals, paths), serve.log, pid.
"""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '_shared'))
import background  # noqa: E402  pylint: disable=import-error,wrong-import-position

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
REALM = 'KAFKA-MIRROR.TEST'
PORTS = {'source': 19492, 'destination': 19592}
SERVICES = {'source': 'kafka', 'destination': 'kafka-dst'}
CLIENTS = ('mirror-src', 'mirror-dst', 'mirror', 'molecule-client')
HEAP = os.environ.get('KERBEROS_TEST_HEAP', '256m')

HOSTS_KRB5_CONF = """\
# krb5.conf for the Molecule test hosts: realm {realm}, KDC on the controller (bridge address)
[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1d
    forwardable = true

[realms]
    {realm} = {{
        kdc = {host}:{port}
    }}

[domain_realm]
    {host} = {realm}
"""


def grant_acls(admin, side, timeout=30):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    def acl(rtype, name, pattern, user, op):
        return AclBinding(rtype, name, pattern, 'User:%s' % user, '*', op, AclPermissionType.ALLOW)
    topic, group, cluster = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    op = AclOperation
    acls = [acl(topic, '*', lit, 'mirror', op.ALL), acl(group, '*', lit, 'mirror', op.ALL),
            acl(cluster, 'kafka-cluster', lit, 'mirror', op.ALL),
            # kafka-mirror's lease per flow, a transactional producer (docs: "One writer per
            # flow"): a flow into this cluster (the fleet's B->A writes into the source side)
            acl(ResourceType.TRANSACTIONAL_ID, 'kafka-mirror.lease.', pre, 'mirror', op.ALL)]
    if side == 'source':
        acls += [acl(topic, '*', lit, 'mirror-src', o) for o in (op.DESCRIBE, op.DESCRIBE_CONFIGS, op.READ)]
        acls += [acl(group, '*', lit, 'mirror-src', op.DESCRIBE),
                 acl(cluster, 'kafka-cluster', lit, 'mirror-src', op.DESCRIBE),
                 acl(cluster, 'kafka-cluster', lit, 'mirror-src', op.DESCRIBE_CONFIGS),
                 acl(topic, 'molecule.', pre, 'molecule-client', op.ALL)]
    else:
        acls += [acl(topic, name, pattern, 'mirror-dst', op.ALL)
                 for name, pattern in (('src.', pre), ('mm2-', pre), ('heartbeats', lit),
                                       ('kafka-mirror.leases', lit))]
        acls += [acl(ResourceType.TRANSACTIONAL_ID, 'kafka-mirror.lease.', pre, 'mirror-dst',
                     op.ALL)]
        acls += [acl(group, '*', lit, 'mirror-dst', op.ALL),
                 acl(cluster, 'kafka-cluster', lit, 'mirror-dst', op.DESCRIBE),
                 acl(cluster, 'kafka-cluster', lit, 'mirror-dst', op.DESCRIBE_CONFIGS),
                 acl(group, 'molecule-', pre, 'molecule-client', op.ALL)]
        acls += [acl(topic, prefix, pre, 'molecule-client', o)
                 for prefix in ('src.molecule.', 'src2.molecule.') for o in (op.DESCRIBE, op.READ)]
    for future in admin.create_acls(acls, request_timeout=timeout).values():
        future.result(timeout=timeout)


def seed(cluster):
    from confluent_kafka import Producer
    cluster.create_topic('molecule.orders', 3)
    cluster.create_topic('molecule.payments', 2, config={'retention.ms': '86400000'})
    producer = Producer(cluster.client_config())
    for i in range(60):
        topic = 'molecule.orders' if i % 2 else 'molecule.payments'
        producer.produce(topic, key=b'seed-%d' % i, value=b'v' * 100, partition=i % (3 if i % 2 else 2))
    if producer.flush(30):
        raise RuntimeError('seed records not delivered')


def keytab_keys(kdc, keytab):
    out = subprocess.run(['klist', '-k', '-K', '-t', keytab], env=dict(os.environ, **kdc.env()),
                         capture_output=True, text=True, check=True).stdout
    return re.findall(r'\(0x([0-9a-f]{16,})\)', out)


def serve(state_dir, host):
    sys.path[:0] = [os.path.join(REPO, 'src'), os.path.join(REPO, 'tests', 'harness')]
    from kafka_mirror_testing.localkdc import GSSAPI_LISTENER, LocalKdc, kerberized_cluster  # pylint: disable=import-error

    stopped = background.on_stop()
    began = time.monotonic()
    clusters = {}
    with LocalKdc(state_dir, realm=REALM, host=host) as kdc:
        keytabs = {}
        for name in CLIENTS:
            keytabs[name] = os.path.join(state_dir, 'keytabs', name + '.keytab')
            kdc.add_principal(name, keytab=Path(keytabs[name]))
        with open(os.path.join(state_dir, 'krb5-hosts.conf'), 'w') as fh:
            fh.write(HOSTS_KRB5_CONF.format(realm=REALM, host=host, port=kdc.tcp_port))
        print('KDC pid %s on %s (realm %s)' % (kdc.pid, kdc.address, kdc.realm), flush=True)
        try:
            for side in ('source', 'destination'):
                clusters[side] = kerberized_cluster(
                    side, state_dir, kdc, heap=HEAP, service=SERVICES[side], host=host, bind=host,
                    port=PORTS[side], server_overrides={
                        'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
                        'allow.everyone.if.no.acl.found': 'false',
                        # the PLAINTEXT listener on 127.0.0.1 (set-up here, inter-broker) and the controller's
                        'super.users': 'User:ANONYMOUS',
                    })
                clusters[side].start(timeout=120)
            for side, cluster in clusters.items():
                grant_acls(cluster.admin(), side)
            seed(clusters['source'])
            background.write_json(os.path.join(state_dir, 'keys.json'),
                       [k for keytab in keytabs.values() for k in keytab_keys(kdc, keytab)])
            background.write_json(os.path.join(state_dir, 'state.json'), {
                'realm': REALM, 'kdc': kdc.address, 'kdc_pid': kdc.pid,
                'krb5_conf': str(kdc.krb5_conf), 'krb5_hosts_conf': os.path.join(state_dir, 'krb5-hosts.conf'),
                'kdc_log': str(kdc.dir / 'krb5kdc.log'),
                'keytabs': keytabs, 'principals': {n: kdc.principal(n) for n in CLIENTS},
                'services': SERVICES,
                'bootstrap': {s: c.bootstrap_for(GSSAPI_LISTENER) for s, c in clusters.items()},
                'plaintext': {s: c.bootstrap for s, c in clusters.items()},
                'broker_pids': {s: c.pid for s, c in clusters.items()},
                'children': [kdc.pid, *(c.pid for c in clusters.values())],
            })
            print('Kerberized clusters up in %.0f s: %s' % (
                time.monotonic() - began,
                ', '.join('%s GSSAPI %s (pid %s)' % (s, c.bootstrap_for(GSSAPI_LISTENER), c.pid)
                          for s, c in clusters.items())), flush=True)
            return background.watch(stopped, [kdc, *clusters.values()], 'a Kerberized cluster or the KDC', state_dir)
        finally:
            for cluster in clusters.values():
                cluster.stop()


if __name__ == '__main__':
    sys.exit(background.main(sys.argv, __file__, serve, 'the Kerberos realm and clusters', __doc__))
