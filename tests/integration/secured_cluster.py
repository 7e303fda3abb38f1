"""A single-node Kafka cluster on 127.0.0.1 with authenticated and encrypted listeners, for
tests/integration/modules_secured.yml.

    python secured_cluster.py WORKDIR VARS_FILE

Listeners: PLAINTEXT (setup only), SASL_PLAINTEXT with PLAIN and SCRAM-SHA-512, SSL (server
certificate for IP 127.0.0.1 signed by a throw-away CA made with openssl), OAUTH (SASL_PLAINTEXT with
OAUTHBEARER: JWTs of a real OIDC provider, Keycloak, started here by kafka_mirror_testing.oidc). The
PLAIN user is declared in the listener's JAAS config, the SCRAM user is created with the Admin API,
the OAuth client in the provider's realm. Passwords and the client secret are random for each run.
When the broker answers on every listener, the Ansible extra-vars (ports, users, passwords, CA path,
OAuth client and token endpoint) are written to VARS_FILE as JSON; the cluster then stays up until SIGTERM or
SIGINT and is stopped by its PID. Needs the repository's src/ (kafka_mirror_testing.localcluster) and the
jars of `mvn -f jvm/pom.xml package`.
"""
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
SCRAM_USER = 'mirror-scram'
OAUTH_CLIENT = 'mirror-oauth'
PLAIN_USER = 'mirror-plain'


def make_tls(d):
    """CA and a server certificate for 127.0.0.1 (PEM); returns (ca.pem, server key+chain.pem)."""
    os.makedirs(d, exist_ok=True)

    def ssl(*args):
        subprocess.run(['openssl'] + list(args), cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=kafka.mirror test CA',
        '-keyout', 'ca.key', '-out', 'ca.pem')
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', 'server.key', '-out', 'server.csr')
    with open(os.path.join(d, 'san.ext'), 'w') as fh:
        fh.write('subjectAltName=IP:127.0.0.1,DNS:localhost\n')
    ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2',
        '-extfile', 'san.ext', '-out', 'server.pem')
    ssl('pkcs8', '-topk8', '-nocrypt', '-in', 'server.key', '-out', 'server.p8')
    keystore = os.path.join(d, 'keystore.pem')
    with open(keystore, 'w') as out:
        for name in ('server.p8', 'server.pem', 'ca.pem'):
            with open(os.path.join(d, name)) as fh:
                out.write(fh.read())
    return os.path.join(d, 'ca.pem'), keystore


def create_scram_user(admin, user, password, timeout=30):
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=timeout)


def wait_authenticated(conf, timeout=30):
    """Until a client with ``conf`` lists topics (the SCRAM credential reached the broker)."""
    from confluent_kafka.admin import AdminClient
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            AdminClient(dict(conf, log_level=0)).list_topics(timeout=3)
            return
        except Exception as e:  # pylint: disable=broad-except
            last = e
            time.sleep(0.3)
    raise RuntimeError('cannot authenticate to %s: %s' % (conf['bootstrap.servers'], last))


def main():
    workdir, vars_file = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    sys.path[:0] = [os.path.join(REPO, 'src'), os.path.join(REPO, 'tests', 'harness')]
    from kafka_mirror_testing.localcluster import LocalKafkaCluster  # pylint: disable=import-error
    from kafka_mirror_testing.oidc import LocalOidcProvider, oauth_listener  # pylint: disable=import-error
    from kafka_mirror_testing.quick_jvms import use_quick_start_jvms  # pylint: disable=import-error

    use_quick_start_jvms()  # a test broker: C1 only (kafka_mirror_testing.quick_jvms)

    plain_pw = 'plain-' + secrets.token_hex(12)
    scram_pw = 'scram-' + secrets.token_hex(12)
    oauth_secret = 'oauth-' + secrets.token_hex(12)
    ca, keystore = make_tls(os.path.join(workdir, 'tls'))
    idp = LocalOidcProvider(os.path.join(workdir, 'oidc'), {OAUTH_CLIENT: oauth_secret}, heap='384m')
    began = time.monotonic()
    idp.start()
    oauth_settings, oauth_jvm_args = oauth_listener(idp, 'OAUTH')
    cluster = LocalKafkaCluster(
        'secured', workdir, heap='384m', log_level='WARN',
        extra_listeners={'SASL_PLAINTEXT': 'SASL_PLAINTEXT', 'SSL': 'SSL', 'OAUTH': 'SASL_PLAINTEXT'},
        jvm_args=oauth_jvm_args,
        server_overrides={
            **oauth_settings,
            'listener.name.sasl_plaintext.sasl.enabled.mechanisms': 'PLAIN,SCRAM-SHA-512',
            'listener.name.sasl_plaintext.plain.sasl.jaas.config':
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";' % (PLAIN_USER, plain_pw),
            'listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config':
                'org.apache.kafka.common.security.scram.ScramLoginModule required;',
            'listener.name.ssl.ssl.keystore.type': 'PEM',
            'listener.name.ssl.ssl.keystore.location': keystore,
            'listener.name.ssl.ssl.client.auth': 'none',
        },
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        cluster.start(timeout=120)
        create_scram_user(cluster.admin(), SCRAM_USER, scram_pw)
        sasl = cluster.bootstrap_for('SASL_PLAINTEXT')
        tls = cluster.bootstrap_for('SSL')
        wait_authenticated({'bootstrap.servers': sasl, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': 'PLAIN',
                            'sasl.username': PLAIN_USER, 'sasl.password': plain_pw})
        wait_authenticated({'bootstrap.servers': sasl, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': 'SCRAM-SHA-512',
                            'sasl.username': SCRAM_USER, 'sasl.password': scram_pw})
        wait_authenticated({'bootstrap.servers': tls, 'security.protocol': 'SSL', 'ssl.ca.location': ca})
        oauth = cluster.bootstrap_for('OAUTH')
        wait_authenticated({'bootstrap.servers': oauth, 'security.protocol': 'SASL_PLAINTEXT',
                            'sasl.mechanism': 'OAUTHBEARER', 'sasl.oauthbearer.method': 'oidc',
                            'sasl.oauthbearer.token.endpoint.url': idp.token_endpoint,
                            'sasl.oauthbearer.client.id': OAUTH_CLIENT, 'sasl.oauthbearer.client.secret': oauth_secret})
        tmp = vars_file + '.tmp'
        with open(tmp, 'w') as fh:
            json.dump(dict(secured_plaintext=cluster.bootstrap, secured_sasl=sasl, secured_ssl=tls, secured_ca=ca,
                           plain_user=PLAIN_USER, plain_password=plain_pw,
                           scram_user=SCRAM_USER, scram_password=scram_pw,
                           wrong_password='wrong-' + secrets.token_hex(12),
                           secured_oauth=oauth, oauth_token_endpoint=idp.token_endpoint,
                           oauth_client_id=OAUTH_CLIENT, oauth_client_secret=oauth_secret), fh)
        os.chmod(tmp, 0o600)
        os.rename(tmp, vars_file)
        print('secured cluster pid %s up in %.0f s: SASL_PLAINTEXT %s, SSL %s, OAUTH %s (Keycloak pid %s)'
              % (cluster.pid, time.monotonic() - began, sasl, tls, oauth, idp.pid),
              flush=True)
        while not stop.wait(1.0):
            if not cluster.alive():
                print('secured cluster died; see %s' % cluster.log_path, file=sys.stderr)
                return 1
        return 0
    finally:
        cluster.stop()
        idp.stop()


if __name__ == '__main__':
    sys.exit(main())
