"""A throw-away MIT Kerberos realm and a Kerberized single-node Kafka cluster on 127.0.0.1, for
tests/integration/modules_kerberos.yml.

    python kerberos_cluster.py WORKDIR VARS_FILE KEYS_FILE

The KDC (krb5kdc -n, realm KAFKA-MIRROR.TEST, free port, files under WORKDIR/kdc) and the broker
come from the repository's kafka_mirror_testing.localkdc. The broker has a SASL_PLAINTEXT listener with
GSSAPI (service principal kafka/localhost, advertised as localhost) and an ACL authorizer, so
that each client principal can only do its own part:

- mirror-src: read the source side (describe topics and their configs, DescribeLogDirs);
- mirror-dst: write the destination side (topics prefixed krb.), describe the cluster;
- mirror: everything (the same principal on both sides).

If a module presented the wrong principal for a side, the ACLs would make it fail. Topics orders
(3 partitions) and payments (2 partitions, retention.ms set) are created and filled. A ticket
cache with a ticket of 'mirror' (kinit done here) stands for a user's own kinit. When everything
answers, the Ansible extra-vars are written to VARS_FILE (JSON), the keytabs' key material (hex)
to KEYS_FILE (to check that it never shows up in the -vvv output); then the cluster and the KDC
stay up until SIGTERM or SIGINT and are stopped by their PIDs.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
PRINCIPALS = ('mirror-src', 'mirror-dst', 'mirror', 'outsider')


def grant_acls(admin, timeout=30):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    allow = AclPermissionType.ALLOW

    def acl(rtype, name, pattern, user, op):
        return AclBinding(rtype, name, pattern, 'User:%s' % user, '*', op, allow)
    topic, cluster = ResourceType.TOPIC, ResourceType.BROKER
    lit, pre = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    acls = [
        acl(topic, '*', lit, 'mirror-src', AclOperation.DESCRIBE),
        acl(topic, '*', lit, 'mirror-src', AclOperation.DESCRIBE_CONFIGS),
        acl(cluster, 'kafka-cluster', lit, 'mirror-src', AclOperation.DESCRIBE),
        acl(topic, 'krb.', pre, 'mirror-dst', AclOperation.ALL),
        acl(cluster, 'kafka-cluster', lit, 'mirror-dst', AclOperation.DESCRIBE),
        acl(cluster, 'kafka-cluster', lit, 'mirror-dst', AclOperation.DESCRIBE_CONFIGS),
        acl(topic, '*', lit, 'mirror', AclOperation.ALL),
        acl(cluster, 'kafka-cluster', lit, 'mirror', AclOperation.ALL),
    ]
    for future in admin.create_acls(acls, request_timeout=timeout).values():
        future.result(timeout=timeout)


def seed(cluster):
    from confluent_kafka import Producer
    cluster.create_topic('orders', 3)
    cluster.create_topic('payments', 2, config={'retention.ms': '86400000'})
    producer = Producer(cluster.client_config())
    for i in range(600):
        producer.produce('orders' if i % 3 else 'payments', key=b'k%d' % i, value=b'v' * 200)
    producer.flush(30)


def keytab_keys(kdc, keytab):
    out = subprocess.run(['klist', '-k', '-K', '-t', keytab], env=dict(os.environ, **kdc.env()),
                         capture_output=True, text=True, check=True).stdout
    return re.findall(r'\(0x([0-9a-f]{16,})\)', out)


def main():
    workdir, vars_file, keys_file = (os.path.abspath(a) for a in sys.argv[1:4])
    sys.path[:0] = [os.path.join(REPO, 'src'), os.path.join(REPO, 'tests', 'harness')]
    from kafka_mirror_testing.localkdc import GSSAPI_LISTENER, LocalKdc, kerberized_cluster  # pylint: disable=import-error
    from kafka_mirror_testing.quick_jvms import use_quick_start_jvms  # pylint: disable=import-error

    use_quick_start_jvms()  # a test broker: C1 only (kafka_mirror_testing.quick_jvms)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    began = time.monotonic()
    with LocalKdc(workdir) as kdc:
        keytabs = dict((name, str(kdc.add_principal(name))) for name in PRINCIPALS)
        print('KDC pid %s on %s (realm %s) in %.1f s' % (kdc.pid, kdc.address, kdc.realm, time.monotonic() - began), flush=True)
        cluster = kerberized_cluster('kerberized', workdir, kdc, server_overrides={
            'authorizer.class.name': 'org.apache.kafka.metadata.authorizer.StandardAuthorizer',
            'allow.everyone.if.no.acl.found': 'false',
            # the PLAINTEXT listener (setup, inter-broker) and the controller's
            'super.users': 'User:ANONYMOUS',
        })
        cluster.start(timeout=120)
        try:
            grant_acls(cluster.admin())
            seed(cluster)
            ticket_cache = 'FILE:%s' % os.path.join(kdc.dir, 'user-ticket.ccache')
            subprocess.run(['kinit', '-c', ticket_cache, '-k', '-t', keytabs['mirror'], kdc.principal('mirror')],
                           env=dict(os.environ, **kdc.env()), check=True)
            keys = []
            for keytab in keytabs.values():
                keys.extend(keytab_keys(kdc, keytab))
            with open(keys_file, 'w') as fh:
                json.dump(keys, fh)
            tmp = vars_file + '.tmp'
            with open(tmp, 'w') as fh:
                json.dump(dict(
                    krb5_config=str(kdc.krb5_conf), krb_bootstrap=cluster.bootstrap_for(GSSAPI_LISTENER),
                    krb_plaintext=cluster.bootstrap, realm=kdc.realm, ticket_cache=ticket_cache,
                    src_principal=kdc.principal('mirror-src'), src_keytab=keytabs['mirror-src'],
                    dst_principal=kdc.principal('mirror-dst'), dst_keytab=keytabs['mirror-dst'],
                    same_principal=kdc.principal('mirror'), same_keytab=keytabs['mirror'],
                    outsider_keytab=keytabs['outsider'], missing_keytab=os.path.join(workdir, 'missing.keytab'),
                ), fh)
            os.rename(tmp, vars_file)
            print('Kerberized cluster pid %s up in %.0f s: GSSAPI on %s'
                  % (cluster.pid, time.monotonic() - began, cluster.bootstrap_for(GSSAPI_LISTENER)), flush=True)
            while not stop.wait(1.0):
                if not cluster.alive() or not kdc.alive():
                    print('Kerberized cluster or KDC died; see %s' % cluster.log_path, file=sys.stderr)
                    return 1
            return 0
        finally:
            cluster.stop()


if __name__ == '__main__':
    sys.exit(main())
