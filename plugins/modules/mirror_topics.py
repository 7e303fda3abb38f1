#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: mirror_topics
short_description: Ensure the destination topics of a Kafka mirror exist and match their source topics
version_added: 0.1.0
description:
  - Selects source topics with MirrorMaker 2 style include and exclude regexes and, for each one,
    ensures the destination topic named by the replication policy exists with the same partition
    count, the requested replication factor and the synced topic configs.
  - Partitions are only ever increased. A destination topic with more partitions than its source
    is left alone and reported in RV(partition_mismatch).
  - The replication factor of an existing destination topic is never changed (that needs a
    partition reassignment); a difference is reported in RV(replication_factor_mismatch).
  - Topics are selected and named by MirrorMaker 2's rules (Kafka 4.x), the very code the
    kafka-mirror engine runs, so the module handles exactly the topics the mirror mirrors.
    Internal topics (names starting with C(__) or C(.), MirrorMaker's own C(mm2*.internal) and
    C(*.checkpoints.internal) topics) and kafka-mirror's own C(kafka-mirror.*) topics are never
    selected nor touched. Heartbeats topics (C(heartbeats), C(<alias>.heartbeats)), which
    MirrorMaker 2 replicates whatever the regexes say, are left to the mirror, which creates them
    itself (they appear on the source while mirrors run).
  - In check mode the module plans and reports the same changes without making any.
author:
  - kafka.mirror maintainers (@kafka-mirror)
extends_documentation_fragment:
  - kafka.mirror.kafka_connection
  - kafka.mirror.kafka_connection.source
  - kafka.mirror.kafka_connection.destination
attributes:
  check_mode:
    support: full
    description: Can run in check mode and return changed status prediction without modifying target.
  diff_mode:
    support: full
    description: Returns details on what has changed (or possibly needs changing in check mode), when in diff mode.
options:
  topics:
    description:
      - Regexes (full match, like MirrorMaker 2's C(topics)) selecting the source topics.
    type: list
    elements: str
    default: ['.*']
  topics_exclude:
    description:
      - Regexes (full match, like MirrorMaker 2's C(topics.exclude)) removing topics from the selection.
    type: list
    elements: str
    default: ['mm2.*\.internal', '.*\.replica', '__.*']
  replication_policy:
    description:
      - C(default) names the destination topic C(<source_alias><separator><topic>) like
        MirrorMaker 2's C(DefaultReplicationPolicy); C(identity) keeps the source name
        (C(IdentityReplicationPolicy)).
    type: str
    default: default
    choices: [default, identity]
  source_alias:
    description:
      - Alias of the source cluster (as in C(clusters=) of C(mm2.properties)). Required with
        O(replication_policy=default).
    type: str
  destination_alias:
    description:
      - Alias of the destination cluster. With O(replication_policy=default), source topics that
        already came from it (C(<destination_alias>.<topic>)) are skipped, like MirrorMaker 2's
        cycle detection.
    type: str
  replication_policy_separator:
    description:
      - Separator of the C(default) replication policy.
    type: str
    default: .
  replication_factor:
    description:
      - Replication factor of created destination topics. C(-1) uses the destination brokers'
        C(default.replication.factor).
    type: int
    default: -1
  sync_configs:
    description:
      - Copy the source topic's explicitly set configs (not broker defaults) to the destination topic.
    type: bool
    default: true
  configs_exclude:
    description:
      - Topic config names never synced (MirrorMaker 2's defaults).
    type: list
    elements: str
    default:
      - follower.replication.throttled.replicas
      - leader.replication.throttled.replicas
      - message.timestamp.difference.max.ms
      - message.timestamp.type
      - unclean.leader.election.enable
      - min.insync.replicas
  config_overrides:
    description:
      - Topic configs set on every selected destination topic, applied after the synced configs.
    type: dict
    default: {}
'''

EXAMPLES = r'''
- name: Create/extend the destination topics before starting the mirror
  kafka.mirror.mirror_topics:
    source_bootstrap_servers: ["src-kafka1:9093", "src-kafka2:9093"]
    source_security_protocol: SASL_SSL
    source_sasl_mechanism: SCRAM-SHA-512
    source_sasl_username: mirror
    source_sasl_password: "{{ vault_source_password }}"
    source_ssl_ca_location: /etc/pki/kafka/ca.pem
    destination_bootstrap_servers: ["dst-kafka1:9093"]
    destination_security_protocol: SASL_SSL
    destination_sasl_mechanism: GSSAPI
    destination_kerberos_principal: mirror@EXAMPLE.COM
    destination_kerberos_keytab: /etc/security/keytabs/mirror.keytab
    topics: ["orders\\..*", "payments"]
    source_alias: dc1
    replication_factor: 3
  register: topics

- name: Plan only
  kafka.mirror.mirror_topics:
    source_bootstrap_servers: ["src-kafka1:9092"]
    destination_bootstrap_servers: ["dst-kafka1:9092"]
    replication_policy: identity
  check_mode: true
  diff: true
'''

RETURN = r'''
created:
  description: Destination topics created (or that would be created in check mode).
  returned: always
  type: list
  elements: str
  sample: ["dc1.orders"]
updated:
  description: Destination topics whose partitions or configs were changed (or would be).
  returned: always
  type: list
  elements: str
  sample: ["dc1.payments"]
unchanged:
  description: Destination topics already matching their source.
  returned: always
  type: list
  elements: str
partition_mismatch:
  description: Destination topics with more partitions than their source (never decreased).
  returned: always
  type: list
  elements: dict
  sample: [{"topic": "dc1.orders", "source_partitions": 6, "destination_partitions": 12}]
replication_factor_mismatch:
  description: Existing destination topics whose replication factor differs from O(replication_factor).
  returned: always
  type: list
  elements: dict
skipped_cycles:
  description: Source topics matched by the regexes but skipped (cycle detection).
  returned: always
  type: list
  elements: str
topics:
  description: Per destination topic, the source topic and the planned state.
  returned: always
  type: dict
  sample: {"dc1.orders": {"source": "orders", "partitions": 6, "configs": {"retention.ms": "86400000"}}}
'''

import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import (
    KafkaModuleError,
    check_confluent_kafka,
    connected_admin_client,
    connection_argument_spec,
    connection_required_if,
    on_side,
)
from ansible_collections.kafka.mirror.plugins.module_utils.topic_selection import (
    TOPICS_EXCLUDE_DEFAULT,
    destination_topic,
    is_heartbeats_topic,
    select_topics,
)

DEFAULT_CONFIGS_EXCLUDE = [
    'follower.replication.throttled.replicas',
    'leader.replication.throttled.replicas',
    'message.timestamp.difference.max.ms',
    'message.timestamp.type',
    'unclean.leader.election.enable',
    'min.insync.replicas',
]


def _result(futures, timeout):
    return dict((k, f.result(timeout=timeout)) for k, f in futures.items())


def describe_topic_configs(client, names, timeout, explicit_only):
    """{topic: {config: value}}; explicit_only keeps configs set on the topic itself."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    result = {}
    for res, fut in client.describe_configs(resources, request_timeout=timeout).items():
        entries = fut.result(timeout=timeout)
        cfg = {}
        for name, entry in entries.items():
            if entry.is_sensitive or entry.value is None:
                continue
            if explicit_only and entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value:
                continue
            cfg[name] = entry.value
        result[res.name] = cfg
    return result


def describe_partitions(client, names, timeout):
    """{topic: (partition_count, replication_factor, is_internal)}"""
    from confluent_kafka import TopicCollection
    if not names:
        return {}
    futures = client.describe_topics(TopicCollection(list(names)), request_timeout=timeout)
    out = {}
    for name, fut in futures.items():
        desc = fut.result(timeout=timeout)
        rf = min(len(p.replicas) for p in desc.partitions) if desc.partitions else 0
        out[name] = (len(desc.partitions), rf, bool(desc.is_internal))
    return out


def read_source(module, src):
    """What the plan needs from the source: (selected, skipped cycles, partitions, configs)."""
    p = module.params
    timeout = p['timeout']
    with on_side(p, 'source'):
        src_names = list(src.list_topics(timeout=timeout).topics.keys())
        selected, skipped = select_topics(src_names, p)
        # heartbeats topics: the mirror creates them (MM2 too), they come and go with mirrors
        selected = [t for t in selected if not is_heartbeats_topic(t, p)]
        src_parts = describe_partitions(src, selected, timeout)
        selected = [t for t in selected if not src_parts[t][2]]  # internal flag from the broker
        src_cfgs = describe_topic_configs(src, selected, timeout, explicit_only=True) if p['sync_configs'] else {}
    return selected, skipped, src_parts, src_cfgs


def plan(module, source, dst):
    p = module.params
    timeout = p['timeout']
    selected, skipped, src_parts, src_cfgs = source

    mapping = dict((t, destination_topic(t, p)) for t in selected)
    with on_side(p, 'destination'):
        dst_existing = set(dst.list_topics(timeout=timeout).topics.keys())
        existing = [d for d in mapping.values() if d in dst_existing]
        dst_parts = describe_partitions(dst, existing, timeout)
        dst_cfgs = describe_topic_configs(dst, existing, timeout, explicit_only=False)

    excluded_cfg = set(p['configs_exclude'])
    overrides = dict((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (p['config_overrides'] or {}).items())
    actions = []
    report = dict(created=[], updated=[], unchanged=[], partition_mismatch=[], replication_factor_mismatch=[],
                  skipped_cycles=sorted(skipped), topics={})
    before, after = {}, {}
    for s_topic in selected:
        d_topic = mapping[s_topic]
        want_parts = src_parts[s_topic][0]
        want_cfg = dict((k, v) for k, v in src_cfgs.get(s_topic, {}).items() if k not in excluded_cfg)
        want_cfg.update(overrides)
        report['topics'][d_topic] = dict(source=s_topic, partitions=want_parts, configs=want_cfg)
        if d_topic not in dst_parts:
            actions.append(('create', d_topic, want_parts, want_cfg))
            report['created'].append(d_topic)
            after[d_topic] = dict(partitions=want_parts, configs=want_cfg)
            continue
        have_parts, have_rf, _internal = dst_parts[d_topic]
        have_cfg = dst_cfgs.get(d_topic, {})
        changed_cfg = dict((k, v) for k, v in want_cfg.items() if have_cfg.get(k) != v)
        new_parts = have_parts
        if have_parts < want_parts:
            new_parts = want_parts
            actions.append(('partitions', d_topic, want_parts, None))
        elif have_parts > want_parts:
            report['partition_mismatch'].append(dict(topic=d_topic, source_topic=s_topic,
                                                     source_partitions=want_parts, destination_partitions=have_parts))
            module.warn('destination topic %s has %d partitions, more than its source %s (%d): left unchanged'
                        % (d_topic, have_parts, s_topic, want_parts))
        if p['replication_factor'] > 0 and have_rf != p['replication_factor']:
            report['replication_factor_mismatch'].append(dict(topic=d_topic, replication_factor=have_rf,
                                                              requested=p['replication_factor']))
        if changed_cfg:
            actions.append(('configs', d_topic, None, changed_cfg))
        if new_parts != have_parts or changed_cfg:
            report['updated'].append(d_topic)
            before[d_topic] = dict(partitions=have_parts, configs=dict((k, have_cfg.get(k)) for k in changed_cfg))
            after[d_topic] = dict(partitions=new_parts, configs=changed_cfg)
        else:
            report['unchanged'].append(d_topic)
    return actions, report, before, after


def apply(module, dst, actions):
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       NewTopic, ResourceType)
    timeout = module.params['timeout']
    rf = module.params['replication_factor']
    new_topics = [NewTopic(t, num_partitions=n, replication_factor=rf, config=dict(c)) for a, t, n, c in actions if a == 'create']
    if new_topics:
        _result(dst.create_topics(new_topics, request_timeout=timeout, operation_timeout=timeout), timeout)
    new_parts = [NewPartitions(t, n) for a, t, n, c in actions if a == 'partitions']
    if new_parts:
        _result(dst.create_partitions(new_parts, request_timeout=timeout, operation_timeout=timeout), timeout)
    resources = []
    for a, t, n, c in actions:
        if a == 'configs':
            entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(c.items())]
            resources.append(ConfigResource(ResourceType.TOPIC, t, incremental_configs=entries))
    if resources:
        _result(dst.incremental_alter_configs(resources, request_timeout=timeout), timeout)


def main():
    argument_spec = connection_argument_spec()
    argument_spec.update(
        topics=dict(type='list', elements='str', default=['.*']),
        topics_exclude=dict(type='list', elements='str', default=list(TOPICS_EXCLUDE_DEFAULT)),
        replication_policy=dict(type='str', default='default', choices=['default', 'identity']),
        source_alias=dict(type='str'),
        destination_alias=dict(type='str'),
        replication_policy_separator=dict(type='str', default='.'),
        replication_factor=dict(type='int', default=-1),
        sync_configs=dict(type='bool', default=True),
        configs_exclude=dict(type='list', elements='str', default=list(DEFAULT_CONFIGS_EXCLUDE)),
        config_overrides=dict(type='dict', default={}),
    )
    module = AnsibleModule(argument_spec=argument_spec, required_if=connection_required_if(), supports_check_mode=True)
    check_confluent_kafka(module)
    if module.params['replication_policy'] == 'default' and not module.params['source_alias']:
        module.fail_json(msg='source_alias is required with replication_policy=default')
    try:
        src = connected_admin_client(module.params, 'source', module.params['timeout'])
        source = read_source(module, src)
        # Done with the source before the destination logs in: with Kerberos both clients would
        # take their tickets from the one default credential cache of this process.
        del src
        dst = connected_admin_client(module.params, 'destination', module.params['timeout'])
        actions, report, before, after = plan(module, source, dst)
        if actions and not module.check_mode:
            with on_side(module.params, 'destination'):
                apply(module, dst, actions)
    except KafkaModuleError as e:
        module.fail_json(msg=to_native(e), exception=traceback.format_exc())
    except Exception as e:  # pylint: disable=broad-except
        module.fail_json(msg='Kafka request failed: %s' % to_native(e), exception=traceback.format_exc())
    report['changed'] = bool(actions)
    if module._diff:
        report['diff'] = dict(before=before, after=after)
    module.exit_json(**report)


if __name__ == '__main__':
    main()
