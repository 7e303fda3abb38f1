# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import (
    MM2_DEFAULT_TOPICS_EXCLUDE,
    connection_argument_spec,
    destination_topic_name,
    is_cycle,
    kafka_python_config,
    librdkafka_config,
    select_topics,
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


def test_select_topics_mm2_semantics_and_internal_never_selected():
    names = ['orders', 'orders.eu', 'x.internal', '__consumer_offsets', 'mm2-offset-syncs.b.internal', 'a.replica', 'pay']
    assert select_topics(names, ['.*'], MM2_DEFAULT_TOPICS_EXCLUDE) == ['orders', 'orders.eu', 'pay']
    # full match, not substring
    assert select_topics(names, ['orders'], []) == ['orders']
    # internal topics stay out even when asked for
    assert select_topics(names, ['__.*', '.*internal'], []) == []


def test_policy_names_and_cycles():
    assert destination_topic_name('t', 'default', 'dc1') == 'dc1.t'
    assert destination_topic_name('t', 'identity', 'dc1') == 't'
    assert is_cycle('dc2.t', 'default', 'dc2')
    assert not is_cycle('t', 'default', 'dc2')
    assert not is_cycle('dc2.t', 'identity', 'dc2')


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
