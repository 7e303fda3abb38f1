# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters used by the kafka.mirror roles: command lines, Java properties values, JAAS strings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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


class FilterModule(object):
    def filters(self):
        return {
            'spark_conf_args': spark_conf_args,
            'cmdline': cmdline,
            'java_properties_escape': java_properties_escape,
            'jaas_quote': jaas_quote,
        }
