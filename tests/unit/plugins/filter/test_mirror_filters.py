# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

import javaproperties
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.kafka.mirror.plugins.filter.mirror_filters import (
    cmdline,
    jaas_quote,
    java_properties_escape,
    mirror_instances,
    spark_conf_args,
    stale_files,
    wheel_versions,
)

# a password with every character that means something to a .properties file, a JAAS line,
# a shell or Kafka's config providers, plus non-ASCII (Latin-1 and beyond, and outside the BMP)
NASTY = u' p\\a"s s#w=o:r!d$ {x} ${env:HOME}\tü€😀 '


def test_spark_conf_args_sorted_and_empty_dropped():
    assert spark_conf_args({'b': '2', 'a': '1', 'c': ''}) == ['--spark-conf', 'a=1', '--spark-conf', 'b=2']
    assert spark_conf_args({'x': True}) == ['--spark-conf', 'x=true']


def test_cmdline_round_trip_supervisord():
    args = ['/bin/x', 'run', 'a b', 'k=-javaagent:/j.jar=9404:/c.yml -Dx=y', 'q"uote']
    line = cmdline(args, 'supervisord')
    assert shlex.split(line) == args


def test_cmdline_systemd_escapes_specifiers():
    assert cmdline(['a', '100%', '$HOME']) == 'a 100%% $$HOME'


@pytest.mark.parametrize('value', [NASTY, u'', u' ', u'plain', u'a\\', u'\\u0041', u'line1\nline2\r\f',
                                   u'#!=:', u'trailing  '])
def test_properties_value_reads_back_exactly_as_java_loads_it(value):
    text = u'k=%s\n' % java_properties_escape(value)
    assert all(ord(c) < 0x7f for c in text)  # ISO-8859-1 safe: Java's load() reads bytes as Latin-1
    assert javaproperties.loads(text) == {u'k': value}


@pytest.mark.parametrize('key', [u'a b', u'a=b', u'a:b', u' lead', u'#k', u'!k', u'ü'])
def test_properties_key_reads_back(key):
    text = u'%s=v\n' % java_properties_escape(key, key=True)
    assert javaproperties.loads(text) == {key: u'v'}


def test_properties_non_strings():
    assert java_properties_escape(True) == 'true'
    assert java_properties_escape(3) == '3'
    assert java_properties_escape(None) == ''


def test_properties_escapes_as_java_store_does():
    assert java_properties_escape(u' a b') == u'\\ a b'
    assert java_properties_escape(u'a=b:c#d!e') == u'a=b:c#d!e'  # literal in a value
    assert java_properties_escape(u'a=b:c#d!e', key=True) == u'a\\=b\\:c\\#d\\!e'
    assert java_properties_escape(u'#!x') == u'#!x'  # after 'key=' a value never starts a comment
    assert java_properties_escape(u'ü€') == u'\\u00FC\\u20AC'
    assert java_properties_escape(u'😀') == u'\\uD83D\\uDE00'


def _jaas_unquote(quoted):
    """What a StreamTokenizer with quoteChar('"') (Kafka's JaasConfig) reads from ``quoted``."""
    assert quoted[0] == quoted[-1] == '"'
    out, chars = [], iter(quoted[1:-1])
    for char in chars:
        if char == '\\':
            nxt = next(chars)
            out.append({'n': '\n', 'r': '\r', 't': '\t'}.get(nxt, nxt))
        else:
            assert char not in '"\n\r'
            out.append(char)
    return ''.join(out)


@pytest.mark.parametrize('value', [NASTY, u'', u'user@REALM', u'a"b\\c', u'x\ny'])
def test_jaas_quote_reads_back(value):
    assert _jaas_unquote(jaas_quote(value)) == value


def test_jaas_line_inside_properties_reads_back():
    line = 'org.apache.kafka.common.security.scram.ScramLoginModule required username=%s password=%s;' % (
        jaas_quote(u'mirror'), jaas_quote(NASTY))
    loaded = javaproperties.loads(u'sasl.jaas.config=%s\n' % java_properties_escape(line))
    assert loaded == {u'sasl.jaas.config': line}


_BASE = {'service_name': 'kafka-mirror', 'service_manager': 'systemd', 'conf_dir': '/etc/kafka-mirror',
         'state_dir': '/var/lib/kafka-mirror', 'log_dir': '/var/log/kafka-mirror', 'metrics_port': 9405,
         'jmx_exporter_port': 9404, 'keytab_dir': '/etc/kafka-mirror/keytabs',
         'krb5_conf_path': '/etc/kafka-mirror/krb5.conf', 'flows': [], 'topics': ['.*'], 'topics_exclude': [],
         'spark_master': 'local[2]', 'spark_driver_host': '', 'spark_driver_memory': '1g', 'extra_args': [],
         'java_opts': [], 'heap_opts': '-Xmx1g', 'service_state': 'started', 'service_enabled': True,
         'custom_properties': {'a': '1'}, 'spark_conf': {'x': '1'}, 'environment': {}, 'systemd_service_overrides': {}}


def test_mirror_instances_empty_is_the_role_wide_instance():
    (one,) = mirror_instances([], _BASE)
    assert one['name'] == '' and one['default'] and one['service'] == 'kafka-mirror'
    assert one['conf_dir'] == '/etc/kafka-mirror' and one['state_dir'] == '/var/lib/kafka-mirror'
    assert one['keytab_dir'] == '/etc/kafka-mirror/keytabs' and one['metrics_port'] == 9405
    assert one['custom_properties'] == {'a': '1'} and one['spark_master'] == 'local[2]'


def test_mirror_instances_named_units_dirs_ports_and_merges():
    ab, ba = mirror_instances([{'name': 'ab', 'flows': [{'source': 'A', 'target': 'B'}], 'spark_conf': {'y': '2'}},
                               {'name': 'ba', 'metrics_port': 9500, 'custom_properties': {'b': '2'}}], _BASE)
    assert ab['service'] == 'kafka-mirror@ab' and ba['service'] == 'kafka-mirror@ba'
    assert ab['conf_dir'] == '/etc/kafka-mirror/ab' and ba['state_dir'] == '/var/lib/kafka-mirror/ba'
    assert ab['keytab_dir'] == '/etc/kafka-mirror/ab/keytabs' and ab['krb5_conf_path'] == '/etc/kafka-mirror/ab/krb5.conf'
    assert (ab['metrics_port'], ab['jmx_exporter_port']) == (9405, 9404)
    assert (ba['metrics_port'], ba['jmx_exporter_port']) == (9500, 9406)
    assert ab['flows'] == [{'source': 'A', 'target': 'B'}] and ba['flows'] == []
    assert ab['spark_conf'] == {'x': '1', 'y': '2'} and ba['custom_properties'] == {'a': '1', 'b': '2'}
    sv = mirror_instances([{'name': 'c'}], dict(_BASE, service_manager='supervisord'))
    assert sv[0]['service'] == 'kafka-mirror-c'


@pytest.mark.parametrize('instances', [
    [{'name': 'Bad'}], [{'name': 'spark'}], [{'name': 'a'}, {'name': 'a'}], [{'name': 'a', 'port': 1}],
    [{'name': 'a'}, {'name': 'b', 'metrics_port': 9404}], ['a'],
])
def test_mirror_instances_rejects(instances):
    with pytest.raises(AnsibleFilterError):
        mirror_instances(instances, _BASE)


def _found(path, checksum, mode='0644', owner='root', group='root'):
    return {'path': path, 'checksum': checksum, 'mode': mode, 'pw_name': owner, 'gr_name': group}


def test_stale_files_are_the_missing_and_the_different_ones():
    wanted = [_found('/c/b.whl', 'bb'), _found('/c/a.whl', 'aa'), _found('/c/same.whl', 'ss')]
    present = [_found('/h/same.whl', 'ss'), _found('/h/b.whl', 'old'), _found('/h/extra.whl', 'xx')]
    assert [f['path'] for f in stale_files(wanted, present)] == ['/c/a.whl', '/c/b.whl']
    assert stale_files([_found('/c/same.whl', 'ss')], [_found('/h/same.whl', 'ss')]) == []


def test_stale_files_compares_mode_owner_and_group_when_given():
    wanted = [_found('/c/a.jar', 'aa')]
    assert stale_files(wanted, [_found('/h/a.jar', 'aa', mode='0600')], mode='0644') == wanted
    assert stale_files(wanted, [_found('/h/a.jar', 'aa', mode='0600')]) == []
    assert stale_files(wanted, [_found('/h/a.jar', 'aa', mode='644')], mode='0644') == []
    assert stale_files(wanted, [_found('/h/a.jar', 'aa', owner='spark')], owner='root') == wanted
    assert stale_files(wanted, [_found('/h/a.jar', 'aa', group='spark')], group='root') == wanted


def test_stale_files_needs_checksums():
    with pytest.raises(AnsibleFilterError, match='get_checksum'):
        stale_files([{'path': '/c/a.jar'}], [])
    with pytest.raises(AnsibleFilterError, match='two lists'):
        stale_files('a', [])


def test_wheel_versions_reads_names_and_versions_as_pip_names_them():
    files = ['/b/wheels/kafka_mirror-0.2.0-py3-none-any.whl', 'pyspark-4.2.0-py2.py3-none-any.whl',
             'confluent_kafka-2.15.1-cp311-cp311-manylinux_2_28_x86_64.whl', 'SHA256SUMS',
             '/b/wheels-gssapi/confluent_kafka-2.15.1+gssapi-cp311-cp311-linux_x86_64.whl']
    assert wheel_versions(files) == {'kafka-mirror': '0.2.0', 'pyspark': '4.2.0',
                                     'confluent-kafka': '2.15.1+gssapi'}
    assert wheel_versions(files, ['kafka_mirror', 'PySpark']) == {'kafka-mirror': '0.2.0', 'pyspark': '4.2.0'}
    assert wheel_versions([]) == {}


def test_wheel_versions_needs_a_list():
    with pytest.raises(AnsibleFilterError, match='list of wheel file names'):
        wheel_versions('kafka_mirror-0.2.0-py3-none-any.whl')
