#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: mirror_lag
short_description: Read how far a kafka-mirror flow is behind its source, from its lag group
version_added: 0.1.0
description:
  - kafka-mirror commits the source positions of each flow to a consumer group on the source cluster
    after committed batches (C(mirror.lag.group.id), by default C(kafka-mirror.<source>_to_<target>)).
    This module reads that group's committed offsets and the end offsets of the same partitions, as
    C(kafka-consumer-groups --describe) would, and returns the lag per partition and in total.
  - With O(since), it also says whether the mirror committed a newer position than that earlier
    result on any partition. The playbook C(kafka.mirror.rolling_restart) uses it to wait until a
    restarted mirror is mirroring again (its lag falling), not only until its process answers.
  - The group is read without joining it (no rebalance of anything). Read-only, in check mode or not.
  - Only the source cluster is contacted; the destination options are accepted (they come from the
    same module defaults as the other modules') and not used.
author:
  - kafka.mirror maintainers (@kafka-mirror)
extends_documentation_fragment:
  - kafka.mirror.kafka_connection
  - kafka.mirror.kafka_connection.source
  - kafka.mirror.kafka_connection.destination
attributes:
  check_mode:
    support: full
    description: Can run in check mode; the module is read-only.
  diff_mode:
    support: none
    description: Nothing is changed, there is no diff.
requirements:
  - confluent-kafka
options:
  group:
    description:
      - The flow's lag group. Without it, C(kafka-mirror.<source_alias>_to_<destination_alias>), the
        default of kafka-mirror's C(mirror.lag.group.id).
    type: str
  source_alias:
    description: Source cluster alias of the flow (names the default O(group)).
    type: str
  destination_alias:
    description: Destination cluster alias of the flow (names the default O(group)).
    type: str
  since:
    description:
      - An earlier result's RV(partitions) (a list of dicts with C(topic), C(partition), C(committed)).
        RV(advanced) tells whether a committed position is newer now on any partition.
    type: list
    elements: dict
'''

EXAMPLES = r'''
- name: Lag of the flow src -> dst
  kafka.mirror.mirror_lag:
    source_bootstrap_servers: [src-kafka1:9092]
    destination_bootstrap_servers: [dst-kafka1:9092]
    source_alias: src
    destination_alias: dst
  delegate_to: localhost
  register: lag

- name: Wait until the mirror commits newer positions (or has nothing left to mirror)
  kafka.mirror.mirror_lag:
    source_bootstrap_servers: [src-kafka1:9092]
    destination_bootstrap_servers: [dst-kafka1:9092]
    group: kafka-mirror.src_to_dst
    since: "{{ lag.partitions }}"
  delegate_to: localhost
  register: again
  until: again.advanced or again.caught_up
  retries: 60
  delay: 5
'''

RETURN = r'''
group:
  description: The lag group read.
  type: str
  returned: always
  sample: kafka-mirror.src_to_dst
partitions:
  description: Per partition of the group, its committed position, the source end offset and the lag.
  type: list
  elements: dict
  returned: always
  sample: [{"topic": "orders", "partition": 0, "committed": 1200, "end": 1250, "lag": 50}]
total_lag:
  description: Sum of the partitions' lag, in records.
  type: int
  returned: always
caught_up:
  description: The group has committed positions and none of its partitions lags.
  type: bool
  returned: always
advanced:
  description: With O(since), a committed position is newer than in O(since) on at least one partition.
  type: bool
  returned: always
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
    librdkafka_config,
    on_side,
)


def read_lag(params, group, timeout):
    """[{topic, partition, committed, end, lag}] of the group's committed partitions."""
    from confluent_kafka import Consumer, TopicPartition
    admin = connected_admin_client(params, 'source', timeout)   # logs in to Kerberos for the consumer too
    topics = admin.list_topics(timeout=timeout).topics
    wanted = [TopicPartition(name, p) for name, meta in sorted(topics.items()) for p in sorted(meta.partitions)
              if not name.startswith('__')]
    conf = librdkafka_config(params, 'source', timeout)
    conf.update({'group.id': group, 'enable.auto.commit': False})
    consumer = Consumer(conf)   # never subscribes: reading committed offsets does not join the group
    try:
        committed = [tp for tp in consumer.committed(wanted, timeout=timeout) if tp.offset >= 0]
        rows = []
        for tp in committed:
            _low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=timeout)
            rows.append(dict(topic=tp.topic, partition=tp.partition, committed=tp.offset, end=high,
                             lag=max(0, high - tp.offset)))
        return rows
    finally:
        consumer.close()


def main():
    argument_spec = connection_argument_spec()
    argument_spec.update(
        group=dict(type='str'),
        source_alias=dict(type='str'),
        destination_alias=dict(type='str'),
        since=dict(type='list', elements='dict'),
    )
    module = AnsibleModule(argument_spec=argument_spec, required_if=connection_required_if(),
                           required_one_of=[('group', 'source_alias')],
                           required_together=[('source_alias', 'destination_alias')],
                           supports_check_mode=True)
    check_confluent_kafka(module)
    p = module.params
    group = p['group'] or 'kafka-mirror.%s_to_%s' % (p['source_alias'], p['destination_alias'])
    try:
        with on_side(p, 'source'):
            rows = read_lag(p, group, p['timeout'])
    except KafkaModuleError as e:
        module.fail_json(msg=to_native(e), exception=traceback.format_exc())
    before = dict(((r.get('topic'), int(r.get('partition', -1))), int(r.get('committed', -1))) for r in p['since'] or [])
    advanced = any(r['committed'] > before.get((r['topic'], r['partition']), -1) for r in rows) if p['since'] is not None else False
    total = sum(r['lag'] for r in rows)
    module.exit_json(changed=False, group=group, partitions=rows, total_lag=total,
                     caught_up=bool(rows) and total == 0, advanced=advanced)


if __name__ == '__main__':
    main()
