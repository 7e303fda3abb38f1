# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import logging
import os
import shutil

import pytest

from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import (
    KafkaModuleError,
    _kafka_python_failure,
    connection_argument_spec,
    describe_side,
    kafka_python_config,
    kerberos_login,
    librdkafka_config,
    on_side,
)


def _params(**kw):
    spec = connection_argument_spec()
    p = dict((k, v.get('default')) for k, v in spec.items())
    p.update(source_bootstrap_servers=['a:1', 'b:2'], destination_bootstrap_servers=['c:3'])
    p.update(kw)
    return p


def test_spec_has_both_sides_and_secrets_are_no_log():
    spec = connection_argument_spec()
    for side in ('source', 'destination'):
        assert spec['%s_sasl_password' % side]['no_log'] is True
        assert spec['%s_ssl_key_password' % side]['no_log'] is True
        assert spec['%s_bootstrap_servers' % side]['required'] is True


def test_librdkafka_config_sasl_scram_and_tls():
    p = _params(source_security_protocol='SASL_SSL', source_sasl_mechanism='SCRAM-SHA-512', source_sasl_username='u',
                source_sasl_password='s3cret', source_ssl_ca_location='/ca.pem', source_ssl_check_hostname=False)
    c = librdkafka_config(p, 'source')
    assert c['bootstrap.servers'] == 'a:1,b:2'
    assert c['sasl.mechanism'] == 'SCRAM-SHA-512' and c['sasl.password'] == 's3cret'
    assert c['ssl.ca.location'] == '/ca.pem'
    assert c['ssl.endpoint.identification.algorithm'] == 'none'


def test_gssapi_settings_per_side():
    p = _params(destination_security_protocol='SASL_PLAINTEXT', destination_sasl_mechanism='GSSAPI',
                destination_kerberos_principal='m@R', destination_kerberos_keytab='/k.keytab')
    c = librdkafka_config(p, 'destination')
    assert c['sasl.kerberos.principal'] == 'm@R' and c['sasl.kerberos.keytab'] == '/k.keytab'
    assert c['sasl.kerberos.service.name'] == 'kafka'
    k = kafka_python_config(p, 'destination')
    assert k['sasl_mechanism'] == 'GSSAPI' and k['sasl_kerberos_service_name'] == 'kafka'


def test_gssapi_without_keytab_uses_the_ticket_cache_and_no_kinit():
    p = _params(source_security_protocol='SASL_PLAINTEXT', source_sasl_mechanism='GSSAPI')
    c = librdkafka_config(p, 'source')
    assert 'sasl.kerberos.keytab' not in c
    assert c['sasl.kerberos.min.time.before.relogin'] == 0  # librdkafka's kinit needs a keytab


def _fake_kinit(tmp_path, monkeypatch, exit_code, stderr=''):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    log = tmp_path / 'kinit.args'
    script = bindir / 'kinit'
    script.write_text('#!/bin/sh\necho "$@" >> %s\necho "%s" >&2\nexit %d\n' % (log, stderr, exit_code))
    script.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bindir, os.environ['PATH']))
    for key in ('KRB5CCNAME', 'KRB5_CLIENT_KTNAME'):
        monkeypatch.delenv(key, raising=False)
    return log


def _gssapi_params(**kw):
    p = dict(source_security_protocol='SASL_PLAINTEXT', source_sasl_mechanism='GSSAPI',
             source_kerberos_principal='src@R', source_kerberos_keytab='/k/src.keytab',
             destination_security_protocol='SASL_PLAINTEXT', destination_sasl_mechanism='GSSAPI',
             destination_kerberos_principal='dst@R', destination_kerberos_keytab='/k/dst.keytab')
    p.update(kw)
    return _params(**p)


def test_kerberos_login_uses_a_private_cache_per_side(tmp_path, monkeypatch):
    log = _fake_kinit(tmp_path, monkeypatch, 0)
    p = _gssapi_params()
    kerberos_login(p, 'source')
    src_cache = os.environ['KRB5CCNAME']
    assert os.environ['KRB5_CLIENT_KTNAME'] == '/k/src.keytab'
    kerberos_login(p, 'destination')
    dst_cache = os.environ['KRB5CCNAME']
    assert os.environ['KRB5_CLIENT_KTNAME'] == '/k/dst.keytab'
    assert src_cache.startswith('FILE:') and dst_cache.startswith('FILE:') and src_cache != dst_cache
    assert os.path.dirname(src_cache[5:]) == os.path.dirname(dst_cache[5:])
    assert oct(os.stat(os.path.dirname(src_cache[5:])).st_mode & 0o777) == '0o700'
    calls = log.read_text().splitlines()
    assert calls == ['-c %s -k -t /k/src.keytab src@R' % src_cache, '-c %s -k -t /k/dst.keytab dst@R' % dst_cache]


def test_kerberos_login_makes_a_new_private_directory_when_an_earlier_run_removed_its_own(tmp_path, monkeypatch):
    """A persistent interpreter (Mitogen) keeps module_utils between module runs but runs each
    run's exit handlers, which remove the caches' directory: the next login makes a new one."""
    log = _fake_kinit(tmp_path, monkeypatch, 0)
    kerberos_login(_gssapi_params(), 'source')
    first = os.path.dirname(os.environ['KRB5CCNAME'][5:])
    shutil.rmtree(first)   # the first run's exit handler
    kerberos_login(_gssapi_params(), 'source')
    second = os.path.dirname(os.environ['KRB5CCNAME'][5:])
    assert second != first and os.path.isdir(second)
    assert oct(os.stat(second).st_mode & 0o777) == '0o700'
    assert len(log.read_text().splitlines()) == 2


def test_kerberos_login_failure_names_the_side_with_kinits_words(tmp_path, monkeypatch):
    _fake_kinit(tmp_path, monkeypatch, 1, 'kinit: Keytab contains no suitable keys for dst@R')
    with pytest.raises(KafkaModuleError) as e:
        kerberos_login(_gssapi_params(), 'destination')
    assert str(e.value).startswith('destination cluster (c:3, SASL_PLAINTEXT GSSAPI user dst@R): Kerberos login failed')
    assert 'no suitable keys' in str(e.value)


def test_kerberos_login_needs_the_principal_with_a_keytab_and_skips_other_sides(tmp_path, monkeypatch):
    log = _fake_kinit(tmp_path, monkeypatch, 0)
    with pytest.raises(KafkaModuleError, match='source_kerberos_keytab needs source_kerberos_principal'):
        kerberos_login(_gssapi_params(source_kerberos_principal=None), 'source')
    kerberos_login(_params(), 'source')  # PLAINTEXT: nothing to do
    kerberos_login(_params(source_security_protocol='SASL_PLAINTEXT', source_sasl_mechanism='GSSAPI'), 'source')
    assert 'KRB5CCNAME' not in os.environ  # no keytab: the environment's cache, untouched
    assert not log.exists()


def test_krb5_config_reaches_kinit_and_a_missing_one_names_the_option(tmp_path, monkeypatch):
    log = _fake_kinit(tmp_path, monkeypatch, 0)
    script = tmp_path / 'bin' / 'kinit'
    script.write_text('#!/bin/sh\necho "KRB5_CONFIG=$KRB5_CONFIG" >> %s\n' % log)
    monkeypatch.delenv('KRB5_CONFIG', raising=False)
    krb5 = tmp_path / 'krb5.conf'
    krb5.write_text('[libdefaults]\n default_realm = R\n')
    kerberos_login(_gssapi_params(krb5_config=str(krb5)), 'source')
    assert log.read_text().splitlines() == ['KRB5_CONFIG=%s' % krb5]
    assert os.environ['KRB5_CONFIG'] == str(krb5)   # for the client libraries created next
    with pytest.raises(KafkaModuleError, match='krb5_config /nowhere/krb5.conf is not a readable file'):
        kerberos_login(_gssapi_params(krb5_config='/nowhere/krb5.conf'), 'destination')


def test_kafka_python_config_sasl_scram_and_tls():
    p = _params(destination_security_protocol='SASL_SSL', destination_sasl_mechanism='SCRAM-SHA-512',
                destination_sasl_username='u', destination_sasl_password='s3cret', destination_ssl_ca_location='/ca.pem')
    k = kafka_python_config(p, 'destination')
    assert k['security_protocol'] == 'SASL_SSL' and k['sasl_mechanism'] == 'SCRAM-SHA-512'
    assert k['sasl_plain_username'] == 'u' and k['sasl_plain_password'] == 's3cret'
    assert k['ssl_cafile'] == '/ca.pem' and k['ssl_check_hostname'] is True


def test_describe_side_names_the_side_and_never_the_password():
    p = _params(destination_security_protocol='SASL_PLAINTEXT', destination_sasl_mechanism='SCRAM-SHA-512',
                destination_sasl_username='mirror', destination_sasl_password='s3cret-pw')
    text = describe_side(p, 'destination')
    assert text == 'destination cluster (c:3, SASL_PLAINTEXT SCRAM-SHA-512 user mirror)'
    assert describe_side(p, 'source') == 'source cluster (a:1,b:2, PLAINTEXT)'


def test_on_side_wraps_errors_with_the_side():
    p = _params()
    with pytest.raises(KafkaModuleError, match=r'^destination cluster \(c:3, PLAINTEXT\): boom$'):
        with on_side(p, 'destination'):
            raise RuntimeError('boom')
    with pytest.raises(KafkaModuleError, match='^already named$'):
        with on_side(p, 'source'):
            raise KafkaModuleError('already named')


def _record(msg, *args):
    return logging.LogRecord('kafka.net.manager', logging.WARNING, __file__, 1, msg, args, None)


def test_kafka_python_failures_auth_and_tls_are_fatal_others_retried():
    errors = pytest.importorskip('kafka.errors')
    auth = _record('Bootstrap connection to %s failed: %s', 'bootstrap-0', errors.SaslAuthenticationFailedError('Invalid username or password'))
    tls = _record('Connection failed: %s', errors.KafkaConnectionError('Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED]'))
    refused = _record('Connection failed: %s', errors.KafkaConnectionError('111 ECONNREFUSED'))
    fatal, text = _kafka_python_failure([refused, auth])
    assert fatal and text.startswith('authentication failed') and 'Invalid username' in text
    fatal, text = _kafka_python_failure([tls])
    assert fatal and text.startswith('TLS handshake failed')
    fatal, text = _kafka_python_failure([refused])
    assert not fatal and text.endswith('111 ECONNREFUSED')
    assert _kafka_python_failure([_record('no args')]) == (False, None)


def test_kafka_python_bootstrap_attempts_grow_until_the_timeout(monkeypatch):
    """Each bootstrap attempt is twice as long as the one before (3 s first), so an exchange
    that needs more than 3 s on a loaded host still gets to its failure; the last one stops at
    the timeout, and the error names the side."""
    errors = pytest.importorskip('kafka.errors')
    admin = pytest.importorskip('kafka.admin')
    from ansible_collections.kafka.mirror.plugins.module_utils import kafka_connection
    clock = [1000.0]
    attempts = []

    def fake_client(bootstrap_timeout_ms, **config):
        attempts.append(bootstrap_timeout_ms)
        clock[0] += bootstrap_timeout_ms / 1000.0
        raise errors.KafkaTimeoutError('Unable to bootstrap')

    monkeypatch.setattr(kafka_connection.time, 'time', lambda: clock[0])
    monkeypatch.setattr(admin, 'KafkaAdminClient', fake_client)
    reached = []
    monkeypatch.setattr(kafka_connection, 'connected_admin_client', lambda params, side, timeout: reached.append(side))
    with pytest.raises(KafkaModuleError, match=r'^destination cluster \(c:3, PLAINTEXT\): no answer within 20 s'):
        kafka_connection.kafka_python_admin_client(_params(), 'destination', timeout=20)
    assert reached == ['destination']  # librdkafka first: it names authentication failures
    assert attempts == [3000, 6000, 11000]


def test_oauthbearer_is_librdkafkas_oidc_per_side_and_needs_endpoint_id_and_secret():
    from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import connection_required_if
    p = _params(destination_security_protocol='SASL_SSL', destination_sasl_mechanism='OAUTHBEARER',
                destination_oauth_token_endpoint_url='https://idp/token', destination_oauth_client_id='mirror',
                destination_oauth_client_secret='s3cret', destination_oauth_scope='kafka')
    c = librdkafka_config(p, 'destination')
    assert c['sasl.mechanism'] == 'OAUTHBEARER' and c['sasl.oauthbearer.method'] == 'oidc'
    assert c['sasl.oauthbearer.token.endpoint.url'] == 'https://idp/token'
    assert (c['sasl.oauthbearer.client.id'], c['sasl.oauthbearer.client.secret']) == ('mirror', 's3cret')
    assert c['sasl.oauthbearer.scope'] == 'kafka' and 'sasl.username' not in c
    assert 'sasl.mechanism' not in librdkafka_config(p, 'source')
    assert connection_argument_spec()['destination_oauth_client_secret']['no_log'] is True
    assert ('destination_sasl_mechanism', 'OAUTHBEARER', ('destination_oauth_token_endpoint_url',
            'destination_oauth_client_id', 'destination_oauth_client_secret')) in connection_required_if()
    described = describe_side(p, 'destination')
    assert 'OAUTHBEARER user mirror' in described and 's3cret' not in described


def _token_endpoint(answers):
    """A local HTTP token endpoint answering each POST with the next (status, body); the
    requests' forms are collected in the returned list."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from urllib.parse import parse_qs
    forms = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            length = int(self.headers['Content-Length'])
            forms.append(dict((k, v[0]) for k, v in parse_qs(self.rfile.read(length).decode()).items()))
            status, body = answers.pop(0)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = HTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, 'http://127.0.0.1:%d/token' % server.server_port, forms


def test_kafka_python_token_provider_does_the_client_credentials_grant_and_names_refusals():
    pytest.importorskip('kafka')
    from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import KafkaModuleError
    server, url, forms = _token_endpoint([
        (200, {'access_token': 'jwt-1', 'expires_in': 300}),
        (401, {'error': 'unauthorized_client'}),
    ])
    try:
        p = _params(source_security_protocol='SASL_PLAINTEXT', source_sasl_mechanism='OAUTHBEARER',
                    source_oauth_token_endpoint_url=url, source_oauth_client_id='mirror',
                    source_oauth_client_secret='s3cret', source_oauth_scope='kafka')
        provider = kafka_python_config(p, 'source')['sasl_oauth_token_provider']
        assert provider.token() == 'jwt-1' and provider.token() == 'jwt-1'   # kept until near expiry
        assert forms == [dict(grant_type='client_credentials', client_id='mirror', client_secret='s3cret', scope='kafka')]
        provider._renew_at = 0   # expired: asks again, and is refused
        with pytest.raises(KafkaModuleError) as err:
            provider.token()
        assert 'refused client mirror: HTTP 401' in str(err.value) and 's3cret' not in str(err.value)
    finally:
        server.shutdown()
