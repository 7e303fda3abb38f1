# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Which source topics mirror_topics and disk_headroom handle, and their destination names.

MirrorMaker 2's rules applied to the modules' options: the rules themselves are module_utils
``mm2_rules``, the very file the kafka-mirror engine selects and names topics with, so the
modules handle exactly the topics the engine mirrors.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import KafkaModuleError
from ansible_collections.kafka.mirror.plugins.module_utils.mm2_rules import (
    DEFAULT_TOPICS_EXCLUDE,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    TopicFilter,
    should_replicate_topic,
)

# MirrorMaker 2's default topics.exclude, the default of the modules' topics_exclude
TOPICS_EXCLUDE_DEFAULT = list(DEFAULT_TOPICS_EXCLUDE)


def replication_policy(params):
    """The policy named by ``replication_policy`` and ``replication_policy_separator``."""
    if params['replication_policy'] == 'identity':
        return IdentityReplicationPolicy(separator=params['replication_policy_separator'])
    return DefaultReplicationPolicy(separator=params['replication_policy_separator'])


def select_topics(names, params):
    """(selected, skipped_cycles), both sorted: the topics of ``names`` MirrorMaker 2 mirrors
    with the modules' options (``topics``, ``topics_exclude``, never internal topics, heartbeats
    topics as with MM2's default heartbeats.replication.enabled=true), and those it skips
    because they came from ``destination_alias`` (cycle detection)."""
    policy = replication_policy(params)
    topic_filter = TopicFilter(tuple(params['topics']), tuple(params['topics_exclude']))
    target = params.get('destination_alias')
    selected, cycles = [], []
    for name in sorted(names):
        if not should_replicate_topic(name, topic_filter, policy, None):
            continue
        if target and policy.is_cycle(name, target):
            cycles.append(name)
        else:
            selected.append(name)
    return selected, cycles


def is_heartbeats_topic(topic, params):
    """True for a heartbeats topic (``heartbeats``, ``<alias><sep>heartbeats``...): MirrorMaker 2
    replicates these whatever the regexes say, and the mirror creates them itself (they appear
    while mirrors run), so ``mirror_topics`` leaves them to it."""
    return replication_policy(params).is_heartbeats_topic(topic)


def destination_topic(topic, params):
    """The name ``topic`` gets on the destination (``source_alias`` may only be left out when
    the policy keeps the name)."""
    alias = params.get('source_alias')
    name = replication_policy(params).format_remote_topic(alias or '', topic)
    if alias is None and name != topic:
        raise KafkaModuleError('source_alias is needed to name the destination topic of %s' % topic)
    return name
