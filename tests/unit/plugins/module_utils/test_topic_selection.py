# -*- coding: utf-8 -*-
"""The modules select and name topics as the kafka-mirror engine does: both are checked against
the same MirrorMaker 2 cases (mm2_topic_cases.json, beside this file; the engine's side is
tests/unit/kafka_mirror/mm2/test_topic_agreement.py in the repository)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import KafkaModuleError
from ansible_collections.kafka.mirror.plugins.module_utils.topic_selection import (
    TOPICS_EXCLUDE_DEFAULT,
    destination_topic,
    is_heartbeats_topic,
    select_topics,
)

with open(os.path.join(os.path.dirname(__file__), 'mm2_topic_cases.json')) as cases_file:
    CASES = json.load(cases_file)


def _params(case, **kw):
    p = dict(topics=case['topics'],
             topics_exclude=TOPICS_EXCLUDE_DEFAULT if case['topics_exclude'] is None else case['topics_exclude'],
             replication_policy=case['policy'], replication_policy_separator=case['separator'],
             source_alias='A', destination_alias='B')
    p.update(kw)
    return p


@pytest.mark.parametrize('case', CASES['cases'], ids=[c['name'] for c in CASES['cases']])
def test_modules_select_and_name_as_the_cases_say(case):
    p = _params(case)
    selected, skipped = select_topics(reversed(CASES['names']), p)
    assert selected == sorted(case['selected'])
    assert skipped == sorted(case['skipped_cycles'])
    assert dict((t, destination_topic(t, p)) for t in selected) == case['selected']


def test_without_destination_alias_nothing_is_skipped_as_a_cycle():
    case = CASES['cases'][0]
    selected, skipped = select_topics(CASES['names'], _params(case, destination_alias=None))
    assert skipped == []
    assert selected == sorted(list(case['selected']) + case['skipped_cycles'])


def test_the_default_exclude_is_mm2_4x():
    assert TOPICS_EXCLUDE_DEFAULT == [r'mm2.*\.internal', r'.*\.replica', r'__.*']


def test_identity_names_need_the_alias_only_for_heartbeats():
    p = _params(CASES['cases'][2], source_alias=None)
    assert destination_topic('orders', p) == 'orders'
    with pytest.raises(KafkaModuleError, match='source_alias is needed to name the destination topic of heartbeats'):
        destination_topic('heartbeats', p)


@pytest.mark.parametrize('policy', ['default', 'identity'])
def test_heartbeats_topics_are_told_apart_for_mirror_topics(policy):
    p = _params(CASES['cases'][0], replication_policy=policy)
    assert is_heartbeats_topic('heartbeats', p)
    assert is_heartbeats_topic('A.heartbeats', p)
    assert is_heartbeats_topic('C.A.heartbeats', p)
    assert not is_heartbeats_topic('orders', p)
    assert not is_heartbeats_topic('my-heartbeats-log', p)
