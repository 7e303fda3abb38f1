# -*- coding: utf-8 -*-
"""The release bundle's check (kafka.mirror.bundle): the manifest of scripts/build-bundle.sh, and
every way a bundle can differ from it, each refused naming the file."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

import pytest

from ansible_collections.kafka.mirror.plugins.module_utils.bundle import BundleError, describe, read_manifest, verify

FILES = {
    'wheels/kafka_mirror-0.2.0-py3-none-any.whl': b'wheel',
    'wheels/pyspark-4.2.0-py2.py3-none-any.whl': b'spark',
    'wheels-gssapi/confluent_kafka-2.15.1+gssapi-cp311-cp311-manylinux_2_34_x86_64.whl': b'gssapi',
    'connector-jars/spark-sql-kafka-0-10_2.13-4.2.0.jar': b'jar',
    'jmx/jmx_prometheus_javaagent-1.0.1.jar': b'agent',
}


@pytest.fixture
def bundle(tmp_path):
    for name, data in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    (tmp_path / 'SHA256SUMS').write_text(''.join(
        '%s  %s\n' % (hashlib.sha256(data).hexdigest(), name) for name, data in sorted(FILES.items())))
    (tmp_path / 'bundle.json').write_text(json.dumps({'version': '0.2.0', 'python': 'cp311'}))
    return tmp_path


def test_a_complete_bundle_is_described(bundle):
    info = describe(str(bundle), verify(str(bundle)))
    assert info['version'] == '0.2.0' and info['python'] == 'cp311' and info['files'] == len(FILES)
    assert info['wheel'] == str(bundle / 'wheels/kafka_mirror-0.2.0-py3-none-any.whl')
    assert info['wheelhouse'] == str(bundle / 'wheels')
    assert info['gssapi_wheels'] == [str(bundle / 'wheels-gssapi/confluent_kafka-2.15.1+gssapi-cp311-cp311-manylinux_2_34_x86_64.whl')]
    assert info['connector_jars_dir'] == str(bundle / 'connector-jars')
    assert info['jmx_exporter_jar'] == str(bundle / 'jmx/jmx_prometheus_javaagent-1.0.1.jar')


def test_a_changed_file_is_refused_by_name(bundle):
    (bundle / 'connector-jars/spark-sql-kafka-0-10_2.13-4.2.0.jar').write_bytes(b'jar!')
    with pytest.raises(BundleError, match=r'connector-jars/spark-sql-kafka-0-10_2.13-4.2.0.jar has sha256 [0-9a-f]{64}, SHA256SUMS says'):
        verify(str(bundle))


def test_a_missing_file_is_refused_by_name(bundle):
    (bundle / 'jmx/jmx_prometheus_javaagent-1.0.1.jar').unlink()
    with pytest.raises(BundleError, match='jmx/jmx_prometheus_javaagent-1.0.1.jar is listed in SHA256SUMS but missing'):
        verify(str(bundle))


def test_a_file_the_manifest_does_not_list_is_refused(bundle):
    (bundle / 'wheels/evil-1.0-py3-none-any.whl').write_bytes(b'x')
    with pytest.raises(BundleError, match='wheels/evil-1.0-py3-none-any.whl is not listed in SHA256SUMS'):
        verify(str(bundle))


def test_no_manifest_or_no_directory(bundle, tmp_path_factory):
    (bundle / 'SHA256SUMS').unlink()
    with pytest.raises(BundleError, match='SHA256SUMS cannot be read'):
        verify(str(bundle))
    with pytest.raises(BundleError, match='is not a directory'):
        verify(str(tmp_path_factory.mktemp('x') / 'nothing'))


@pytest.mark.parametrize('text, message', [
    ('', 'lists no file'),
    ('abc  wheels/a.whl\n', 'line 1 is not'),
    ('%s  ../etc/passwd\n' % ('0' * 64), 'outside the bundle'),
    ('%s  /etc/passwd\n' % ('0' * 64), 'outside the bundle'),
])
def test_a_broken_manifest_is_refused(text, message):
    with pytest.raises(BundleError, match=message):
        read_manifest(text)


def test_binary_mode_marker_and_upper_case_digests():
    digest = 'A' * 64
    assert read_manifest('%s *wheels/a.whl\n' % digest) == {'wheels/a.whl': 'a' * 64}
