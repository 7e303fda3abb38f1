# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters used by the kafka.mirror roles: command lines, Java properties values, JAAS strings,
mirror instances, files to copy."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.collections import is_sequence
from ansible.module_utils.six import string_types


def spark_conf_args(conf):
    """{'k': 'v'} -> ['--spark-conf', 'k=v', ...], keys sorted, empty values dropped."""
    if not isinstance(conf, dict):
        raise AnsibleFilterError('spark_conf_args expects a dict, got %s' % type(conf).__name__)
    out = []
    for key in sorted(conf):
        value = conf[key]
        if value is None or (isinstance(value, string_types) and value == ''):
            continue
        if isinstance(value, bool):
            value = str(value).lower()
        out.extend(['--spark-conf', '%s=%s' % (key, value)])
    return out


def _quote(arg, style):
    arg = str(arg).replace('%', '%%')
    if style == 'systemd':
        arg = arg.replace('$', '$$')
    if arg and not any(c in arg for c in ' \t\n"\'\\;'):
        return arg
    return '"%s"' % arg.replace('\\', '\\\\').replace('"', '\\"')


def cmdline(args, style='systemd'):
    """Join a list of arguments into one command line that systemd's ExecStart= (style
    systemd) or supervisord's command= (style supervisord) splits back into the same arguments."""
    if not is_sequence(args):
        raise AnsibleFilterError('cmdline expects a list')
    if style not in ('systemd', 'supervisord'):
        raise AnsibleFilterError('cmdline style must be systemd or supervisord')
    return ' '.join(_quote(a, style) for a in args)


def _text(value):
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return ''
    return value if isinstance(value, string_types) else str(value)


_PROPERTIES_ESCAPES = {'\t': '\\t', '\n': '\\n', '\r': '\\r', '\f': '\\f', '\\': '\\\\'}
# separators and comment starts matter in a key only; a value keeps them readable (host:port)
_KEY_ESCAPES = {'=': '\\=', ':': '\\:', '#': '\\#', '!': '\\!'}


def java_properties_escape(value, key=False):
    """A key or value escaped as java.util.Properties.store() escapes it (ISO-8859-1 with \\u
    escapes), so that Properties.load() reads back exactly ``value``; in a value, ``= : # !``
    stay as they are (load() reads them literally there)."""
    text = _text(value)
    out = []
    for index, char in enumerate(text):
        code = ord(char)
        if char in _PROPERTIES_ESCAPES:
            out.append(_PROPERTIES_ESCAPES[char])
        elif key and char in _KEY_ESCAPES:
            out.append(_KEY_ESCAPES[char])
        elif char == ' ':
            out.append('\\ ' if key or index == 0 else ' ')
        elif code < 0x20 or code > 0x7e:
            if code > 0xFFFF:  # a surrogate pair, as Java strings hold it
                code -= 0x10000
                out.append('\\u%04X\\u%04X' % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)))
            else:
                out.append('\\u%04X' % code)
        else:
            out.append(char)
    return ''.join(out)


def jaas_quote(value):
    """A JAAS option value in double quotes, as Kafka's JaasConfig (a StreamTokenizer) reads
    it back: backslash, double quote and line breaks escaped."""
    text = _text(value)
    for char, escaped in (('\\', '\\\\'), ('"', '\\"'), ('\n', '\\n'), ('\r', '\\r')):
        text = text.replace(char, escaped)
    return '"%s"' % text


# mirror_instances: instance key -> how its value combines with the role-wide variable
_INSTANCE_REPLACE = ('flows', 'topics', 'topics_exclude', 'spark_master', 'spark_driver_host',
                     'spark_driver_memory', 'extra_args', 'java_opts', 'heap_opts', 'service_state',
                     'service_enabled')
_INSTANCE_MERGE = ('custom_properties', 'spark_conf', 'environment', 'systemd_service_overrides')
_INSTANCE_KEYS = frozenset(_INSTANCE_REPLACE + _INSTANCE_MERGE + (
    'name', 'metrics_port', 'jmx_exporter_port', 'conf_dir', 'state_dir', 'log_dir'))
_INSTANCE_RESERVED = frozenset(('keytabs', 'spark', 'instances'))


def mirror_instances(instances, base):
    """Resolve mirror_instances against the role-wide settings ``base`` (a dict with service_name,
    service_manager, conf_dir, state_dir, log_dir, metrics_port, jmx_exporter_port and, optionally,
    the role-wide value of every key of _INSTANCE_REPLACE / _INSTANCE_MERGE: None / {} without).

    Returns one dict per instance with every key set: an empty list is the one instance of the
    role-wide variables (name '', unit base.service_name, base's directories); a named instance runs
    as <service_name>@<name> (systemd) or <service_name>-<name> (supervisord), in <dir>/<name>
    directories, on metrics_port / jmx_exporter_port of base plus twice its index unless it sets them (9404/9405,
    9406/9407, ... with the role's defaults)."""
    if not is_sequence(instances):
        raise AnsibleFilterError('mirror_instances expects a list of instances')
    if not isinstance(base, dict):
        raise AnsibleFilterError('mirror_instances expects the role-wide settings as a dict')
    missing = [k for k in ('service_name', 'service_manager', 'conf_dir', 'state_dir', 'log_dir',
                           'metrics_port', 'jmx_exporter_port') if k not in base]
    if missing:
        raise AnsibleFilterError('mirror_instances: base lacks %s' % ', '.join(missing))
    service, manager = base['service_name'], base['service_manager']

    def resolved(name, index, given):
        out = {'name': name, 'default': name == ''}
        for key in _INSTANCE_REPLACE:
            out[key] = given[key] if given.get(key) is not None else base.get(key)
        for key in _INSTANCE_MERGE:
            merged = dict(base.get(key) or {})
            merged.update(given.get(key) or {})
            out[key] = merged
        for key in ('metrics_port', 'jmx_exporter_port'):
            out[key] = int(given[key]) if given.get(key) is not None else int(base[key]) + 2 * index
        for key in ('conf_dir', 'state_dir', 'log_dir'):
            out[key] = given.get(key) or (base[key] if name == '' else '%s/%s' % (base[key].rstrip('/'), name))
        if name == '':
            out['service'] = service
        else:
            out['service'] = '%s%s%s' % (service, '@' if manager == 'systemd' else '-', name)
        out['keytab_dir'] = base.get('keytab_dir') if name == '' else out['conf_dir'] + '/keytabs'
        out['krb5_conf_path'] = base.get('krb5_conf_path') if name == '' else out['conf_dir'] + '/krb5.conf'
        return out

    if len(instances) == 0:
        return [resolved('', 0, {})]
    out, seen = [], set()
    for index, given in enumerate(instances):
        if not isinstance(given, dict):
            raise AnsibleFilterError('mirror_instances[%d] must be a dict' % index)
        name = _text(given.get('name'))
        if not re.match(r'^[a-z0-9][a-z0-9_-]*$', name) or name in _INSTANCE_RESERVED:
            raise AnsibleFilterError(
                'mirror_instances[%d]: name %r must be lowercase letters, digits, _ and - (first a letter or '
                'digit), and none of %s' % (index, name, ', '.join(sorted(_INSTANCE_RESERVED))))
        if name in seen:
            raise AnsibleFilterError('mirror_instances: name %r is listed more than once' % name)
        seen.add(name)
        unknown = sorted(set(given) - _INSTANCE_KEYS)
        if unknown:
            raise AnsibleFilterError('mirror_instances[%d] (%s): unknown keys %s (known: %s)' % (
                index, name, ', '.join(unknown), ', '.join(sorted(_INSTANCE_KEYS))))
        out.append(resolved(name, index, given))
    ports = {}
    for inst in out:
        for key in ('metrics_port', 'jmx_exporter_port'):
            port = inst[key]
            if port in ports and ports[port] != (inst['name'], key):
                raise AnsibleFilterError('mirror_instances: port %d is both %s of %s and %s of %s' % (
                    port, ports[port][1], ports[port][0], key, inst['name']))
            ports[port] = (inst['name'], key)
    return out


def stale_files(wanted, present, mode=None, owner=None, group=None):
    """The files of ``wanted`` (``find`` results with checksums, on the controller) that ``present``
    (the same, on the host) lacks: no file of that name, another checksum, or another mode, owner or
    group (each compared when given)."""
    if not is_sequence(wanted) or not is_sequence(present):
        raise AnsibleFilterError('stale_files expects two lists of find results')
    have = dict((os.path.basename(f['path']), f) for f in present)
    stale = []
    for f in wanted:
        if 'checksum' not in f:
            raise AnsibleFilterError('stale_files: %s has no checksum (find needs get_checksum: true)' % f['path'])
        h = have.get(os.path.basename(f['path']))
        if (h is None or h.get('checksum') != f['checksum']
                or (mode is not None and int(str(h.get('mode', '0')), 8) != int(str(mode), 8))
                or (owner is not None and h.get('pw_name') != owner)
                or (group is not None and h.get('gr_name') != group)):
            stale.append(f)
    return sorted(stale, key=lambda f: f['path'])


def wheel_versions(files, names=None):
    """{distribution: version} of wheel file names (or paths), later files overriding earlier ones
    (a GSSAPI variant after the plain wheel); distributions as pip names them (``kafka-mirror``),
    only those of ``names`` when given."""
    if not is_sequence(files):
        raise AnsibleFilterError('wheel_versions expects a list of wheel file names')
    wanted = None if names is None else set(_canonical(n) for n in names)
    versions = {}
    for path in files:
        name = os.path.basename(str(path))
        parts = name[:-len('.whl')].split('-') if name.endswith('.whl') else []
        if len(parts) < 5:
            continue  # not a wheel: {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl
        dist = _canonical(parts[0])
        if wanted is None or dist in wanted:
            versions[dist] = parts[1]
    return versions


def _canonical(name):
    return re.sub(r'[-_.]+', '-', str(name)).lower()


class FilterModule(object):
    def filters(self):
        return {
            'spark_conf_args': spark_conf_args,
            'cmdline': cmdline,
            'java_properties_escape': java_properties_escape,
            'jaas_quote': jaas_quote,
            'mirror_instances': mirror_instances,
            'stale_files': stale_files,
            'wheel_versions': wheel_versions,
        }
