# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.kafka.mirror.plugins.filter.mirror_filters import cmdline, spark_conf_args


def test_spark_conf_args_sorted_and_empty_dropped():
    assert spark_conf_args({'b': '2', 'a': '1', 'c': ''}) == ['--spark-conf', 'a=1', '--spark-conf', 'b=2']
    assert spark_conf_args({'x': True}) == ['--spark-conf', 'x=true']


def test_cmdline_round_trip_supervisord():
    args = ['/bin/x', 'run', 'a b', 'k=-javaagent:/j.jar=9404:/c.yml -Dx=y', 'q"uote']
    line = cmdline(args, 'supervisord')
    assert shlex.split(line) == args


def test_cmdline_systemd_escapes_specifiers():
    assert cmdline(['a', '100%', '$HOME']) == 'a 100%% $$HOME'
