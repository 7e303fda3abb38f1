# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters used by the kafka.mirror roles to build command lines."""

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


class FilterModule(object):
    def filters(self):
        return {
            'spark_conf_args': spark_conf_args,
            'cmdline': cmdline,
        }
