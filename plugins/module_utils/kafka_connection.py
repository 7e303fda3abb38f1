# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Shared connection settings for the kafka.mirror modules.

One connection argument spec is defined once and instantiated with a prefix for each side
(``source_`` and ``destination_``), in the style of community.postgresql. The same settings are
translated into librdkafka properties (confluent-kafka) and kafka-python keyword arguments.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
import traceback

from ansible.module_utils.common.text.converters import to_text

CONFLUENT_IMP_ERR = None
try:
    from confluent_kafka.admin import AdminClient  # noqa: F401 pylint: disable=unused-import
    HAS_CONFLUENT_KAFKA = True
except ImportError:
    CONFLUENT_IMP_ERR = traceback.format_exc()
    HAS_CONFLUENT_KAFKA = False

KAFKA_PYTHON_IMP_ERR = None
try:
    from kafka.admin import KafkaAdminClient  # noqa: F401 pylint: disable=unused-import
    HAS_KAFKA_PYTHON = True
except ImportError:
    KAFKA_PYTHON_IMP_ERR = traceback.format_exc()
    HAS_KAFKA_PYTHON = False

SIDES = ('source', 'destination')

SECURITY_PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL']
SASL_MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'GSSAPI', 'OAUTHBEARER']


def _base_spec():
    """Connection options without prefix; each is exposed as ``<side>_<name>``."""
    return dict(
        bootstrap_servers=dict(type='list', elements='str', required=True),
        security_protocol=dict(type='str', default='PLAINTEXT', choices=SECURITY_PROTOCOLS),
        sasl_mechanism=dict(type='str', choices=SASL_MECHANISMS),
        sasl_username=dict(type='str'),
        sasl_password=dict(type='str', no_log=True),
        kerberos_principal=dict(type='str'),
        kerberos_keytab=dict(type='path', no_log=False),
        kerberos_service_name=dict(type='str', default='kafka'),
        oauth_token_endpoint_url=dict(type='str', no_log=False),
        oauth_client_id=dict(type='str'),
        oauth_client_secret=dict(type='str', no_log=True),
        oauth_scope=dict(type='str'),
        ssl_ca_location=dict(type='path'),
        ssl_certificate_location=dict(type='path'),
        ssl_key_location=dict(type='path', no_log=False),
        ssl_key_password=dict(type='str', no_log=True),
        ssl_check_hostname=dict(type='bool', default=True),
        client_properties=dict(type='dict', default={}),
    )


def connection_argument_spec(sides=SIDES):
    """Argument spec with ``<side>_<option>`` for each side, built from one definition."""
    spec = {}
    for side in sides:
        for name, opts in _base_spec().items():
            spec['%s_%s' % (side, name)] = dict(opts)
    spec['timeout'] = dict(type='int', default=30)
    spec['krb5_config'] = dict(type='path')
    return spec


def connection_required_if(sides=SIDES):
    rules = []
    for side in sides:
        rules.append(('%s_sasl_mechanism' % side, 'PLAIN', ('%s_sasl_username' % side, '%s_sasl_password' % side)))
        rules.append(('%s_sasl_mechanism' % side, 'SCRAM-SHA-256', ('%s_sasl_username' % side, '%s_sasl_password' % side)))
        rules.append(('%s_sasl_mechanism' % side, 'SCRAM-SHA-512', ('%s_sasl_username' % side, '%s_sasl_password' % side)))
        rules.append(('%s_sasl_mechanism' % side, 'OAUTHBEARER',
                      ('%s_oauth_token_endpoint_url' % side, '%s_oauth_client_id' % side, '%s_oauth_client_secret' % side)))
        rules.append(('%s_security_protocol' % side, 'SASL_PLAINTEXT', ('%s_sasl_mechanism' % side,)))
        rules.append(('%s_security_protocol' % side, 'SASL_SSL', ('%s_sasl_mechanism' % side,)))
    return rules


def side_params(params, side):
    """The connection settings of one side, without the prefix."""
    prefix = side + '_'
    return dict((k[len(prefix):], v) for k, v in params.items() if k.startswith(prefix))


def librdkafka_config(params, side, timeout=30):
    """librdkafka (confluent-kafka) properties for one side."""
    p = side_params(params, side)
    conf = {
        'bootstrap.servers': ','.join(p['bootstrap_servers']),
        'security.protocol': p['security_protocol'],
        'socket.timeout.ms': int(timeout) * 1000,
        'client.id': 'kafka.mirror-ansible',
    }
    if p.get('sasl_mechanism'):
        conf['sasl.mechanism'] = p['sasl_mechanism']
        if p['sasl_mechanism'] == 'GSSAPI':
            conf['sasl.kerberos.service.name'] = p.get('kerberos_service_name') or 'kafka'
            if p.get('kerberos_principal'):
                conf['sasl.kerberos.principal'] = p['kerberos_principal']
            if p.get('kerberos_keytab'):
                conf['sasl.kerberos.keytab'] = p['kerberos_keytab']
            else:
                # tickets from the cache of an earlier kinit: librdkafka must not run kinit
                # (its default kinit command needs a keytab)
                conf['sasl.kerberos.min.time.before.relogin'] = 0
        elif p['sasl_mechanism'] == 'OAUTHBEARER':
            # the OIDC client credentials grant, done by librdkafka (needs its libcurl)
            conf['sasl.oauthbearer.method'] = 'oidc'
            conf['sasl.oauthbearer.token.endpoint.url'] = p.get('oauth_token_endpoint_url')
            conf['sasl.oauthbearer.client.id'] = p.get('oauth_client_id')
            conf['sasl.oauthbearer.client.secret'] = p.get('oauth_client_secret')
            if p.get('oauth_scope'):
                conf['sasl.oauthbearer.scope'] = p['oauth_scope']
        else:
            conf['sasl.username'] = p.get('sasl_username')
            conf['sasl.password'] = p.get('sasl_password')
    if p.get('ssl_ca_location'):
        conf['ssl.ca.location'] = p['ssl_ca_location']
    if p.get('ssl_certificate_location'):
        conf['ssl.certificate.location'] = p['ssl_certificate_location']
    if p.get('ssl_key_location'):
        conf['ssl.key.location'] = p['ssl_key_location']
    if p.get('ssl_key_password'):
        conf['ssl.key.password'] = p['ssl_key_password']
    if p['security_protocol'] in ('SSL', 'SASL_SSL'):
        conf['ssl.endpoint.identification.algorithm'] = 'https' if p.get('ssl_check_hostname', True) else 'none'
    for key, value in (p.get('client_properties') or {}).items():
        conf[key] = value
    return conf


def kafka_python_config(params, side, timeout=30):
    """kafka-python keyword arguments for one side (used where confluent-kafka has no API)."""
    p = side_params(params, side)
    conf = dict(
        bootstrap_servers=list(p['bootstrap_servers']),
        security_protocol=p['security_protocol'],
        request_timeout_ms=int(timeout) * 1000,
        client_id='kafka.mirror-ansible',
    )
    if p.get('sasl_mechanism'):
        conf['sasl_mechanism'] = p['sasl_mechanism']
        if p['sasl_mechanism'] == 'GSSAPI':
            # credentials: the side's private cache and client keytab set by kerberos_login()
            conf['sasl_kerberos_service_name'] = p.get('kerberos_service_name') or 'kafka'
        elif p['sasl_mechanism'] == 'OAUTHBEARER':
            conf['sasl_oauth_token_provider'] = kafka_python_token_provider(p, timeout)
        else:
            conf['sasl_plain_username'] = p.get('sasl_username')
            conf['sasl_plain_password'] = p.get('sasl_password')
    if p['security_protocol'] in ('SSL', 'SASL_SSL'):
        conf['ssl_check_hostname'] = bool(p.get('ssl_check_hostname', True))
        if p.get('ssl_ca_location'):
            conf['ssl_cafile'] = p['ssl_ca_location']
        if p.get('ssl_certificate_location'):
            conf['ssl_certfile'] = p['ssl_certificate_location']
        if p.get('ssl_key_location'):
            conf['ssl_keyfile'] = p['ssl_key_location']
        if p.get('ssl_key_password'):
            conf['ssl_password'] = p['ssl_key_password']
    return conf


class ClientCredentialsTokens(object):
    """kafka-python's OAUTHBEARER token provider (its ``token()`` method) for the OIDC client
    credentials grant, which kafka-python cannot do itself: one POST to the token endpoint per
    token, kept until a minute before it expires. ``ca_location`` verifies an https endpoint."""

    def __init__(self, url, client_id, secret, scope=None, ca_location=None, timeout=30):
        self.url, self.client_id, self.scope = url, client_id, scope
        self._secret = secret
        self._ca = ca_location
        self._timeout = timeout
        self._token, self._renew_at = None, 0.0

    def token(self):
        if self._token is None or time.time() >= self._renew_at:
            self._token, lifetime = self._fetch()
            self._renew_at = time.time() + max(0, lifetime - 60)
        return self._token

    def extensions(self):
        return {}

    def _fetch(self):
        import json
        from urllib.error import HTTPError, URLError
        from urllib.parse import urlencode

        from ansible.module_utils.urls import open_url
        form = dict(grant_type='client_credentials', client_id=self.client_id, client_secret=self._secret)
        if self.scope:
            form['scope'] = self.scope
        try:
            answer = open_url(self.url, data=urlencode(form), method='POST', timeout=self._timeout, ca_path=self._ca,
                              headers={'Content-Type': 'application/x-www-form-urlencoded'})
            body = json.loads(answer.read().decode('utf-8'))
        except HTTPError as err:
            raise KafkaModuleError('OAuth token endpoint %s refused client %s: HTTP %s %s'
                                   % (self.url, self.client_id, err.code, err.read().decode('utf-8', 'replace')[:300]))
        except (URLError, OSError, ValueError) as err:
            raise KafkaModuleError('OAuth token endpoint %s: %s' % (self.url, to_text(err)))
        if 'access_token' not in body:
            raise KafkaModuleError('OAuth token endpoint %s answered without an access_token' % self.url)
        return body['access_token'], int(body.get('expires_in') or 300)


def kafka_python_token_provider(side, timeout=30):
    """A ClientCredentialsTokens that is also kafka-python's AbstractTokenProvider (which
    kafka-python requires), for one side's settings (without prefix)."""
    try:
        from kafka.net.sasl.oauth import AbstractTokenProvider  # kafka-python 3
    except ImportError:
        from kafka.sasl.oauth import AbstractTokenProvider  # kafka-python 2
    provider = type('ClientCredentialsTokenProvider', (ClientCredentialsTokens, AbstractTokenProvider), {})
    return provider(side.get('oauth_token_endpoint_url'), side.get('oauth_client_id'),
                    side.get('oauth_client_secret'), side.get('oauth_scope'), side.get('ssl_ca_location'), timeout)


_KRB5_ENV = ('KRB5CCNAME', 'KRB5_CLIENT_KTNAME')
_krb5_state = {}


def _krb5_private_dir():
    """A private directory (mode 0700) for this module run's Kerberos caches, removed at exit.

    Made again when the last one is gone: a runner that keeps module_utils imported between
    module runs (Mitogen's persistent interpreter) runs each run's exit handlers at its end,
    which removes the directory but leaves this module's state."""
    if not os.path.isdir(_krb5_state.get('dir', '')):
        # the environment before the first login (a later one's would hold that login's cache)
        _krb5_state.setdefault('saved', dict((k, os.environ.get(k)) for k in _KRB5_ENV))
        _krb5_state['dir'] = tempfile.mkdtemp(prefix='kafka.mirror-krb5-')
        atexit.register(shutil.rmtree, _krb5_state['dir'], True)
    return _krb5_state['dir']


def kerberos_login(params, side, timeout=30):
    """Log in to Kerberos for one side before its client is created (GSSAPI with a keytab).

    Each side gets its own credential cache in a private temporary directory (never the user's
    default cache): ``kinit -k -t <keytab> <principal>`` fills it, and KRB5CCNAME and
    KRB5_CLIENT_KTNAME point at it and at the keytab for the client created next. A failed
    kinit is a KafkaModuleError naming the side, with kinit's own message. Without a keytab the
    environment's cache (a ``kinit`` done beforehand) is used as it is.

    Both client libraries take their tickets from the process's *current* default cache, so
    the modules finish with one side before they log in to the other: two different principals
    (one per side) work because no client of the first side is used after the second logs in.
    """
    p = side_params(params, side)
    if p.get('sasl_mechanism') != 'GSSAPI':
        return
    krb5_config = params.get('krb5_config')
    if krb5_config:   # read by kinit, Cyrus SASL (librdkafka) and python-gssapi (kafka-python) alike
        if not os.path.isfile(krb5_config):
            raise KafkaModuleError('%s: krb5_config %s is not a readable file' % (describe_side(params, side), krb5_config))
        os.environ['KRB5_CONFIG'] = krb5_config
    keytab = p.get('kerberos_keytab')
    if not keytab:
        for key, value in _krb5_state.get('saved', {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        return
    principal = p.get('kerberos_principal')
    if not principal:
        raise KafkaModuleError('%s: %s_kerberos_keytab needs %s_kerberos_principal' % (describe_side(params, side), side, side))
    ccache = 'FILE:%s' % os.path.join(_krb5_private_dir(), '%s.ccache' % side)
    env = dict(os.environ, KRB5CCNAME=ccache)
    argv = ['kinit', '-c', ccache, '-k', '-t', keytab, principal]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as e:
        raise KafkaModuleError('%s: Kerberos login needs kinit (MIT Kerberos client tools: krb5-user on Debian/Ubuntu, '
                               'krb5-workstation on RHEL): %s' % (describe_side(params, side), to_text(e)))
    deadline = time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        raise KafkaModuleError('%s: Kerberos login as %s got no answer from the KDC within %s s' % (describe_side(params, side), principal, timeout))
    out, err = proc.communicate()
    if proc.returncode != 0:
        text = to_text(err or out).strip() or 'kinit exited with %s' % proc.returncode
        raise KafkaModuleError('%s: Kerberos login failed (keytab %s): %s' % (describe_side(params, side), keytab, text))
    os.environ['KRB5CCNAME'] = ccache
    os.environ['KRB5_CLIENT_KTNAME'] = keytab


def check_confluent_kafka(module):
    if not HAS_CONFLUENT_KAFKA:
        from ansible.module_utils.basic import missing_required_lib
        module.fail_json(msg=missing_required_lib('confluent-kafka'), exception=CONFLUENT_IMP_ERR)


def check_kafka_python(module):
    if not HAS_KAFKA_PYTHON:
        from ansible.module_utils.basic import missing_required_lib
        module.fail_json(msg=missing_required_lib('kafka-python>=3.0'), exception=KAFKA_PYTHON_IMP_ERR)


def _quiet_logger(name):
    logger = logging.getLogger(name)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def describe_side(params, side):
    """``destination cluster (host:9093, SASL_PLAINTEXT SCRAM-SHA-512 user mirror)``, no secrets."""
    p = side_params(params, side)
    how = p['security_protocol']
    if p.get('sasl_mechanism'):
        how += ' ' + p['sasl_mechanism']
        user = dict(GSSAPI=p.get('kerberos_principal'), OAUTHBEARER=p.get('oauth_client_id')).get(
            p['sasl_mechanism'], p.get('sasl_username'))
        if user:
            how += ' user %s' % user
    return '%s cluster (%s, %s)' % (side, ','.join(p['bootstrap_servers']), how)


def connected_admin_client(params, side, timeout=30):
    """A confluent-kafka AdminClient for one side that has answered a metadata request.

    Authentication and TLS handshake failures are reported at once (librdkafka would otherwise
    retry them until the timeout and then only say "transport failure"); every failure is a
    KafkaModuleError naming the side."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient as _AdminClient
    errors = []
    kerberos_login(params, side, timeout)
    conf = librdkafka_config(params, side, timeout)
    conf['error_cb'] = errors.append
    conf['logger'] = _quiet_logger('kafka.mirror.librdkafka')
    client = _AdminClient(conf)
    fatal = (KafkaError._AUTHENTICATION, KafkaError._SSL)  # pylint: disable=protected-access
    deadline = time.time() + timeout
    while True:
        try:
            client.list_topics(timeout=max(0.1, min(1.0, deadline - time.time())))
            del errors[:]
            return client
        except KafkaException as e:
            client.poll(0)
            bad = [err for err in errors if err.code() in fatal]
            if bad:
                kind = 'authentication failed' if bad[-1].code() == KafkaError._AUTHENTICATION else 'TLS handshake failed'  # pylint: disable=protected-access
                raise KafkaModuleError('%s: %s: %s' % (describe_side(params, side), kind, bad[-1].str()))
            if time.time() >= deadline:
                last = errors[-1].str() if errors else to_text(e)
                raise KafkaModuleError('%s: no answer within %s s: %s' % (describe_side(params, side), timeout, last))


@contextlib.contextmanager
def on_side(params, side):
    """Re-raise any failure of the requests made in the block as a KafkaModuleError naming the side."""
    try:
        yield
    except KafkaModuleError:
        raise
    except Exception as e:  # pylint: disable=broad-except
        raise KafkaModuleError('%s: %s' % (describe_side(params, side), to_text(e)))


class _Records(logging.Handler):
    def __init__(self):
        logging.Handler.__init__(self, logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def _kafka_python_failure(records):
    """(fatal, message) of the last connection error kafka-python logged, or (False, None)."""
    from kafka.errors import AuthorizationError, SaslAuthenticationFailedError
    found = (False, None)
    for record in records:
        for arg in record.args if isinstance(record.args, tuple) else ():
            if not isinstance(arg, Exception):
                continue
            text = to_text(arg)
            if isinstance(arg, (SaslAuthenticationFailedError, AuthorizationError)):
                found = (True, 'authentication failed: %s' % text)
            elif 'Handshake failed' in text or 'SSL' in text:
                found = (True, 'TLS handshake failed: %s' % text)
            elif not found[0]:
                found = (False, text)
    return found


def kafka_python_admin_client(params, side, timeout=30):
    """A kafka-python KafkaAdminClient for one side; failures are KafkaModuleError naming the side.

    kafka-python retries authentication and TLS failures until its bootstrap timeout and then only
    says "Unable to bootstrap": the side is first reached with librdkafka (connected_admin_client),
    which names such failures; then the client is built with short bootstrap attempts (3 s, each
    next one twice as long), and the errors it logs are inspected between them."""
    from kafka.admin import KafkaAdminClient as _KafkaAdminClient
    from kafka import errors as kafka_errors
    retry_on = (kafka_errors.KafkaTimeoutError, getattr(kafka_errors, 'NoBrokersAvailable', kafka_errors.KafkaTimeoutError))
    # librdkafka names a failed authentication or TLS handshake as such; kafka-python 3 may only see
    # the broker close the connection after a failed SASL exchange (its error response and the close
    # arriving together on a loaded host), and then says "Unable to bootstrap"
    connected_admin_client(params, side, timeout)
    kerberos_login(params, side, timeout)
    handler = _Records()
    logger = logging.getLogger('kafka')
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.WARNING:
        logger.setLevel(logging.WARNING)
    deadline = time.time() + timeout
    tries = 0
    try:
        while True:
            # 3 s, then twice as long each time: a loaded host or broker may need more than 3 s
            # for the SASL exchange whose failure is looked for
            attempt = max(0.5, min(3.0 * 2 ** tries, deadline - time.time()))
            tries += 1
            del handler.records[:]
            try:
                return _KafkaAdminClient(bootstrap_timeout_ms=int(attempt * 1000), **kafka_python_config(params, side, timeout))
            except retry_on as e:
                fatal, text = _kafka_python_failure(handler.records)
                if fatal:
                    raise KafkaModuleError('%s: %s' % (describe_side(params, side), text))
                if time.time() >= deadline:
                    raise KafkaModuleError('%s: no answer within %s s: %s' % (describe_side(params, side), timeout, text or to_text(e)))
    finally:
        logger.removeHandler(handler)


class KafkaModuleError(Exception):
    pass
