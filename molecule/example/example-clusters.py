#!/usr/bin/env python3
"""Controller side of the Molecule scenario "example": the clusters `inventories/example` and
`inventories/fleet` name, as they name them, on addresses of the bridge the test hosts reach.

    example-clusters.py start STATE_DIR BRIDGE_IP   start in the background (idempotent); wait until ready
    example-clusters.py stop  STATE_DIR             SIGTERM to the recorded PID, wait, remove STATE_DIR
    example-clusters.py serve STATE_DIR BRIDGE_IP   (what `start` runs) in the foreground until SIGTERM

- dc1: 3 KRaft nodes kafka1..3.dc1.example.net:9093, SASL_SSL with GSSAPI; the realm DC1.EXAMPLE.NET (an MIT
  KDC on BRIDGE_IP, a free port), service principals kafka/kafkaN.dc1.example.net, the clients
  svc-mirror-read (example) and svc-mirror (fleet).
- dc2: 3 KRaft nodes kafka1..3.dc2.example.net:9093, SASL_SSL with SCRAM-SHA-512; the users
  svc-mirror-write (example) and svc-mirror (fleet).
- dc3 (fleet): 3 KRaft nodes kafka1..3.dc3.example.net:9093 (the fleet lists two as bootstrap servers),
  SASL_SSL with SCRAM-SHA-512; the user svc-mirror.
One CA signs every node (the example's dc1-ca.pem and dc2-ca.pem, the fleet's ca.pem). Node N of a
cluster binds ADDRESSES[cluster][N-1] (addresses the scenario adds to the bridge; the names resolve
to them through STATE_DIR/hosts, which the test hosts and the controller's ansible-playbook get). Every node also has a PLAINTEXT listener on 127.0.0.1 (inter-broker, and the
verifier's produce and consume). RF 3, min.insync.replicas 2, as production runs them.

STATE_DIR gets files/ (what inventories/example/files/README.md asks for: krb5.conf,
svc-mirror-read.keytab, dc1-ca.pem, dc2-ca.pem), fleet-files/ (inventories/fleet's: krb5.conf,
svc-mirror-dc1.keytab, ca.pem), hosts (the name lines), state.json (written last: PLAINTEXT
bootstraps, the SCRAM passwords, the PIDs), serve.log, pid.
"""
import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '_shared'))
import background  # noqa: E402  pylint: disable=import-error,wrong-import-position

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
REALM = 'DC1.EXAMPLE.NET'
PORT = 9093
LISTENER = 'SASL_SSL'
ADDRESSES = {'dc1': ['10.77.0.101', '10.77.0.102', '10.77.0.103'],
             'dc2': ['10.77.0.111', '10.77.0.112', '10.77.0.113'],
             'dc3': ['10.77.0.121', '10.77.0.122', '10.77.0.123']}
READER, WRITER, FLEET = 'svc-mirror-read', 'svc-mirror-write', 'svc-mirror'
HEAP = os.environ.get('EXAMPLE_TEST_HEAP', '256m')
STORE_PASSWORD = 'example-store'
# topics on dc1: the inventory's mirror_topics select the first four; the last matches
# orders\..* and the exclude list's .*-tmp
TOPICS = {'orders.eu': 3, 'orders.us': 2, 'payments': 2, 'customers-b2b': 1, 'orders.audit-tmp': 1}
# the fleet's flows also read dc1's audit, dc2's orders.* and payments, dc3's audit
FLEET_TOPICS = {'dc1': {'audit': 1}, 'dc2': {'orders.eu': 1, 'payments': 1}, 'dc3': {'audit': 1}}



def names(cluster):
    return ['kafka%d.%s.example.net' % (n, cluster) for n in (1, 2, 3)]


def hosts_lines():
    return ''.join('%s %s\n' % (ip, name) for cluster in ADDRESSES
                   for ip, name in zip(ADDRESSES[cluster], names(cluster)))


def tls(state_dir, cluster, ca, ca_key):
    """A PKCS12 store with the cluster's nodes' certificate (one for the three names), signed by ca."""
    from kafka_mirror_testing.certs import certificate, java_key_stores, new_key  # pylint: disable=import-error
    key = new_key()
    cert = certificate(names(cluster)[0], key, ca, ca_key, names=names(cluster))
    java_key_stores(Path(state_dir), cluster, key, cert, [ca], STORE_PASSWORD)
    prefix = 'listener.name.%s.' % LISTENER.lower()
    return {prefix + 'ssl.keystore.location': os.path.join(state_dir, cluster + '.p12'),
            prefix + 'ssl.keystore.type': 'PKCS12',
            prefix + 'ssl.keystore.password': STORE_PASSWORD,
            prefix + 'ssl.key.password': STORE_PASSWORD}


def cluster_of(name, state_dir, overrides, node_overrides=None, kdc=None):
    from kafka_mirror_testing.multinode import MultiNodeKafkaCluster, NodeAddress  # pylint: disable=import-error
    return MultiNodeKafkaCluster(
        name, Path(state_dir), nodes=3, heap=HEAP, server_overrides=overrides,
        extra_listeners={LISTENER: LISTENER},
        node_addresses={LISTENER: [NodeAddress(host, ip, PORT)
                                   for host, ip in zip(names(name), ADDRESSES[name])]},
        node_overrides=node_overrides or {},
        jvm_args=kdc.jvm_args() if kdc else (), env=kdc.env() if kdc else None)


def scram_user(cluster, user, password, timeout=30):
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = cluster.admin()
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=timeout).values():
        future.result(timeout=timeout)


def seed(cluster, topics):
    from confluent_kafka import Producer
    for topic, partitions in topics.items():
        cluster.create_topic(topic, partitions)
    producer = Producer(cluster.client_config(acks='all'))
    for topic, partitions in topics.items():
        for i in range(10 * partitions):
            producer.produce(topic, key=b'seed-%d' % i, value=b'%s %d' % (topic.encode(), i),
                             partition=i % partitions)
    if producer.flush(60):
        raise RuntimeError('seed records not delivered')


def serve(state_dir, host):
    sys.path[:0] = [os.path.join(REPO, 'src'), os.path.join(REPO, 'tests', 'harness')]
    from kafka_mirror_testing.certs import certificate, new_key, pem  # pylint: disable=import-error
    from kafka_mirror_testing.localkdc import LocalKdc, combined_krb5_conf  # pylint: disable=import-error

    stopped = background.on_stop()
    began = time.monotonic()
    files, fleet_files = Path(state_dir) / 'files', Path(state_dir) / 'fleet-files'
    files.mkdir(parents=True)
    fleet_files.mkdir()
    (Path(state_dir) / 'hosts').write_text(hosts_lines())
    ca_key = new_key()
    ca = certificate('example.net test CA', ca_key, None, ca_key)
    for path in (files / 'dc1-ca.pem', files / 'dc2-ca.pem', fleet_files / 'ca.pem'):
        path.write_bytes(pem(ca))
    clusters = {}
    with LocalKdc(state_dir, realm=REALM, host=host) as kdc:
        kdc.add_principal(READER, keytab=files / (READER + '.keytab'))
        kdc.add_principal(FLEET, keytab=fleet_files / (FLEET + '-dc1.keytab'))
        for where in (files, fleet_files):   # inventories' mirror_krb5_conf_src, the modules' KRB5_CONFIG
            combined_krb5_conf(where / 'krb5.conf', [kdc], REALM, {'.dc1.example.net': REALM})
        prefix = 'listener.name.%s.' % LISTENER.lower()
        jaas = {}
        for n, name in enumerate(names('dc1'), start=1):
            principal = kdc.principal('kafka/' + name)
            keytab = kdc.add_principal(principal)
            jaas[n] = {prefix + 'gssapi.sasl.jaas.config': (
                'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
                'storeKey=true keyTab="%s" principal="%s";' % (keytab, principal))}
        scram = {prefix + 'sasl.enabled.mechanisms': 'SCRAM-SHA-512',
                 prefix + 'scram-sha-512.sasl.jaas.config':
                     'org.apache.kafka.common.security.scram.ScramLoginModule required;'}
        passwords = {(name, user): secrets.token_urlsafe(18)
                     for name, user in (('dc2', WRITER), ('dc2', FLEET), ('dc3', FLEET))}
        try:
            clusters['dc1'] = cluster_of('dc1', state_dir, {
                **tls(state_dir, 'dc1', ca, ca_key), prefix + 'sasl.enabled.mechanisms': 'GSSAPI',
                'sasl.kerberos.service.name': 'kafka'}, node_overrides=jaas, kdc=kdc)
            for name in ('dc2', 'dc3'):
                clusters[name] = cluster_of(name, state_dir, {**tls(state_dir, name, ca, ca_key), **scram})
            with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
                for future in [pool.submit(c.start, timeout=180) for c in clusters.values()]:
                    future.result()
            for (name, user), password in passwords.items():
                scram_user(clusters[name], user, password)
            seed(clusters['dc1'], {**TOPICS, **FLEET_TOPICS['dc1']})
            for name in ('dc2', 'dc3'):
                seed(clusters[name], FLEET_TOPICS[name])
            background.write_json(os.path.join(state_dir, 'state.json'), {
                'realm': REALM, 'kdc': kdc.address, 'files': str(files), 'fleet_files': str(fleet_files),
                'hosts': os.path.join(state_dir, 'hosts'), 'topics': TOPICS,
                'plaintext': {name: c.bootstrap for name, c in clusters.items()},
                'bootstrap': {name: c.bootstrap_for(LISTENER) for name, c in clusters.items()},
                'writer': WRITER, 'writer_password': passwords[('dc2', WRITER)],
                'fleet_passwords': {name: passwords[(name, FLEET)] for name in ('dc2', 'dc3')},
                'children': [kdc.pid, *(node.pid for c in clusters.values() for node in c.nodes)],
            })
            print('dc1, dc2 and dc3 up in %.0f s: %s' % (time.monotonic() - began, ', '.join(
                '%s %s' % (name, c.bootstrap_for(LISTENER)) for name, c in clusters.items())), flush=True)
            return background.watch(stopped, [kdc, *clusters.values()], 'a node of dc1, dc2 or dc3, or the KDC', state_dir)
        finally:
            for cluster in clusters.values():
                cluster.stop()


if __name__ == '__main__':
    sys.exit(background.main(sys.argv, __file__, serve, 'the example clusters dc1, dc2 and dc3', __doc__))
