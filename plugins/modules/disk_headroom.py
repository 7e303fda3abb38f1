#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) kafka.mirror contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: disk_headroom
short_description: Check that the destination Kafka cluster and the mirror host can take the mirrored data
version_added: 0.1.0
description:
  - Measures the size of the selected source topics from the source brokers' log dirs
    (Kafka DescribeLogDirs; one replica per partition is counted). Topics are selected by
    MirrorMaker 2's rules, as in M(kafka.mirror.mirror_topics).
  - Counts only what is still to be mirrored. Data already on the destination topics (named by
    O(replication_policy), O(source_alias) and O(replication_policy_separator), as in
    M(kafka.mirror.mirror_topics)) already takes its place in the destination's used space. A
    partition needs the share of its source bytes that its destination copy does not hold yet,
    by record count (end minus start offset on each side; byte sizes would mislead when the
    destination compresses differently). A re-run on a healthy mirror passes. Without
    O(source_alias) under the C(default) policy, everything counts as still to be mirrored.
  - Measures the usable space of every log dir of every destination broker (DescribeLogDirs v4,
    Kafka 3.3 and later) and the free space of a local path on the host running the module.
  - Fails with a per-broker table when the destination cannot take the source data times the
    replication factor plus O(margin_percent), assuming partitions spread evenly over the
    destination brokers, or when the local path has less than O(local_min_free_mb) free.
  - Read-only; it never changes anything, in check mode or not.
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
  - kafka-python >= 3.0 (DescribeLogDirs, which confluent-kafka does not expose)
  - confluent-kafka (record counts of mirrored partitions, with O(source_alias) or O(replication_policy=identity))
options:
  topics:
    description:
      - Regexes (full match) selecting the source topics, as in MirrorMaker 2's C(topics).
    type: list
    elements: str
    default: ['.*']
  topics_exclude:
    description:
      - Regexes (full match) removing topics from the selection, as in C(topics.exclude).
    type: list
    elements: str
    default: ['mm2.*\.internal', '.*\.replica', '__.*']
  replication_factor:
    description:
      - Replication factor the destination topics will have. C(-1) reads
        C(default.replication.factor) from a destination broker.
    type: int
    default: -1
  margin_percent:
    description:
      - Extra headroom required on top of the replicated size, in percent.
    type: float
    default: 20
  local_path:
    description:
      - A path on the host running the module (for example the mirror's state directory) whose
        file system must keep at least O(local_min_free_mb) free. The nearest existing parent is
        measured when the path does not exist yet.
    type: path
  local_min_free_mb:
    description:
      - Free space required at O(local_path), in MiB.
    type: int
    default: 1024
  replication_policy:
    description:
      - How destination topics are named, as in M(kafka.mirror.mirror_topics). C(default) names
        them C(<source_alias><separator><topic>); C(identity) keeps the source names.
    type: str
    default: default
    choices: [default, identity]
  source_alias:
    description:
      - Alias of the source cluster, the prefix of the destination topic names with
        O(replication_policy=default).
    type: str
  destination_alias:
    description:
      - Alias of the destination cluster. With O(replication_policy=default), source topics that
        already came from it (C(<destination_alias>.<topic>), the other direction of an
        active-active pair) are not mirrored back, as in M(kafka.mirror.mirror_topics), and are
        not counted (RV(skipped_cycles)).
    type: str
  replication_policy_separator:
    description:
      - Separator between the source alias and the topic name.
    type: str
    default: '.'
  fail_on_insufficient:
    description:
      - Fail when the headroom is insufficient. With C(false) the module only reports RV(ok).
    type: bool
    default: true
'''

EXAMPLES = r'''
- name: Check disk headroom before mirroring
  kafka.mirror.disk_headroom:
    source_bootstrap_servers: ["src-kafka1:9092"]
    destination_bootstrap_servers: ["dst-kafka1:9092", "dst-kafka2:9092", "dst-kafka3:9092"]
    topics: ["orders\\..*"]
    source_alias: dc1            # destination topics dc1.orders.*: what they hold counts as used
    replication_factor: 3
    margin_percent: 25
    local_path: /var/lib/kafka-mirror
'''

RETURN = r'''
ok:
  description: Whether every destination broker and the local path have enough room.
  returned: always
  type: bool
source_bytes:
  description: Size of the selected source topics (one replica per partition).
  returned: always
  type: int
topics:
  description: Size in bytes of each selected source topic.
  returned: always
  type: dict
remaining_bytes:
  description: Bytes still to be mirrored, per partition the source size beyond its destination copy.
  returned: always
  type: int
remaining:
  description: Bytes still to be mirrored of each selected source topic.
  returned: always
  type: dict
required_bytes:
  description: Bytes still to be mirrored times the replication factor times (1 + margin).
  returned: always
  type: int
replication_factor:
  description: Replication factor used for the calculation.
  returned: always
  type: int
brokers:
  description: Per destination broker, its log dirs, usable bytes, share of the data to take, and status.
  returned: always
  type: list
  elements: dict
  sample: [{"broker": 1, "log_dirs": ["/var/lib/kafka"], "total_bytes": 1000, "usable_bytes": 900, "required_bytes": 300, "ok": true}]
local:
  description: Free space at O(local_path).
  returned: when O(local_path) is set
  type: dict
skipped_cycles:
  description: Selected source topics that came from the destination (O(destination_alias)) and are not counted.
  returned: always
  type: list
  elements: str
table:
  description: The per-broker table, one line per broker, as printed on failure.
  returned: always
  type: list
  elements: str
'''

import os
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.kafka.mirror.plugins.module_utils.kafka_connection import (
    KafkaModuleError,
    check_confluent_kafka,
    check_kafka_python,
    connected_admin_client,
    connection_argument_spec,
    connection_required_if,
    kafka_python_admin_client,
    on_side,
)
from ansible_collections.kafka.mirror.plugins.module_utils.topic_selection import (
    TOPICS_EXCLUDE_DEFAULT,
    destination_topic,
    select_topics,
)


def _human(n):
    n = float(n)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if abs(n) < 1024 or unit == 'TiB':
            return '%.1f %s' % (n, unit) if unit != 'B' else '%d B' % n
        n /= 1024
    return str(n)


def partition_sizes(admin, topics):
    """{(topic, partition): bytes}, largest replica per partition (the leader normally has the
    most data)."""
    if not topics:
        return {}
    per_partition = {}
    for broker in admin.describe_log_dirs(topic_partitions=topics):
        for log_dir in broker['log_dirs']:
            if log_dir.get('error_code'):
                continue
            for t in log_dir['topics']:
                for part in t['partitions']:
                    if part.get('is_future_key'):
                        continue
                    key = (t['name'], part['partition_index'])
                    if key[0] in topics:
                        per_partition[key] = max(per_partition.get(key, 0), part['partition_size'])
    return per_partition


def record_counts(params, side, partitions, timeout):
    """{(topic, partition): records it holds (end minus start offset)}."""
    if not partitions:
        return {}
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    client = connected_admin_client(params, side, timeout)
    bounds = {}
    for name, spec in (('start', OffsetSpec.earliest()), ('end', OffsetSpec.latest())):
        request = dict((TopicPartition(t, n), spec) for t, n in partitions)
        for tp, future in client.list_offsets(request, request_timeout=timeout).items():
            bounds.setdefault((tp.topic, tp.partition), {})[name] = future.result(timeout).offset
    return dict((k, max(0, v['end'] - v['start'])) for k, v in bounds.items())


def remaining_sizes(sizes, names, source_counts, destination_counts):
    """{source topic: bytes still to be mirrored}: per partition, the share of its bytes that
    the destination copy does not hold yet, by record count (``names``: source topic ->
    existing destination topic)."""
    remaining = {}
    for (topic, partition), size in sizes.items():
        share = 1.0
        if names.get(topic):
            held = source_counts.get((topic, partition), 0)
            copied = destination_counts.get((names[topic], partition), 0)
            share = max(0.0, 1.0 - float(copied) / held) if held else 0.0
        remaining[topic] = remaining.get(topic, 0) + int(size * share)
    return remaining


def destination_dirs(admin):
    """[{broker, log_dirs, total_bytes, usable_bytes}]"""
    out = []
    for broker in admin.describe_log_dirs(topic_partitions=[]):
        dirs, total, usable, unknown = [], 0, 0, False
        for log_dir in broker['log_dirs']:
            if log_dir.get('error_code'):
                continue
            dirs.append(log_dir['log_dir'])
            if log_dir.get('total_bytes', -1) < 0 or log_dir.get('usable_bytes', -1) < 0:
                unknown = True
                continue
            total += log_dir['total_bytes']
            usable += log_dir['usable_bytes']
        out.append(dict(broker=broker['broker'], log_dirs=dirs, total_bytes=total, usable_bytes=usable, unknown=unknown))
    return sorted(out, key=lambda b: b['broker'])


def default_replication_factor(admin):
    from kafka.admin import ConfigResource, ConfigResourceType
    brokers = sorted(b['broker_id'] for b in admin.describe_cluster()['brokers'])
    node = str(brokers[0])
    res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)], config_filter='all')
    entry = res.get('broker', {}).get(node, {}).get('default.replication.factor') or {}
    return int(entry.get('value') or 1)


def local_free(path):
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    st = os.statvfs(probe or '/')
    return probe, st.f_bavail * st.f_frsize


def main():
    argument_spec = connection_argument_spec()
    argument_spec.update(
        topics=dict(type='list', elements='str', default=['.*']),
        topics_exclude=dict(type='list', elements='str', default=list(TOPICS_EXCLUDE_DEFAULT)),
        replication_factor=dict(type='int', default=-1),
        replication_policy=dict(type='str', default='default', choices=['default', 'identity']),
        source_alias=dict(type='str'),
        destination_alias=dict(type='str'),
        replication_policy_separator=dict(type='str', default='.'),
        margin_percent=dict(type='float', default=20),
        local_path=dict(type='path'),
        local_min_free_mb=dict(type='int', default=1024),
        fail_on_insufficient=dict(type='bool', default=True),
    )
    module = AnsibleModule(argument_spec=argument_spec, required_if=connection_required_if(), supports_check_mode=True)
    check_kafka_python(module)
    check_confluent_kafka(module)
    p = module.params
    try:
        src = kafka_python_admin_client(p, 'source', p['timeout'])
        try:
            with on_side(p, 'source'):
                topics, skipped = select_topics(src.list_topics(), p)
                source_parts = partition_sizes(src, topics)
        finally:
            src.close()
        dst = kafka_python_admin_client(p, 'destination', p['timeout'])
        try:
            with on_side(p, 'destination'):
                names = {}
                if p['replication_policy'] == 'identity' or p['source_alias']:
                    existing = set(dst.list_topics())
                    names = dict((t, destination_topic(t, p)) for t in topics)
                    names = dict((t, d) for t, d in names.items() if d in existing)
                brokers = destination_dirs(dst)
                rf = p['replication_factor'] if p['replication_factor'] > 0 else default_replication_factor(dst)
        finally:
            dst.close()
        mapped = [tp for tp in source_parts if tp[0] in names]
        with on_side(p, 'source'):
            source_counts = record_counts(p, 'source', mapped, p['timeout'])
        with on_side(p, 'destination'):
            destination_counts = record_counts(p, 'destination', [(names[t], n) for t, n in mapped], p['timeout'])
    except KafkaModuleError as e:
        module.fail_json(msg=to_native(e), exception=traceback.format_exc())
    except Exception as e:  # pylint: disable=broad-except
        module.fail_json(msg='Kafka request failed: %s' % to_native(e), exception=traceback.format_exc())

    sizes = dict((t, 0) for t in topics)
    for (topic, _partition), size in source_parts.items():
        sizes[topic] += size
    remaining = remaining_sizes(source_parts, names, source_counts, destination_counts)
    source_bytes = sum(sizes.values())
    remaining_bytes = sum(remaining.values())
    required = int(remaining_bytes * rf * (1 + p['margin_percent'] / 100.0))
    n = max(len(brokers), 1)
    share = int(required / n) if n else required
    ok = True
    table = ['%-8s %14s %14s %14s  %-6s %s' % ('broker', 'total', 'usable', 'required', 'status', 'log dirs')]
    for b in brokers:
        b['required_bytes'] = share
        b['ok'] = (not b['unknown']) and b['usable_bytes'] >= share
        ok = ok and b['ok']
        status = 'OK' if b['ok'] else ('UNKNOWN' if b['unknown'] else 'SHORT')
        row = (b['broker'], _human(b['total_bytes']), _human(b['usable_bytes']), _human(share), status, ','.join(b['log_dirs']))
        table.append('%-8s %14s %14s %14s  %-6s %s' % row)
    result = dict(changed=False, source_bytes=source_bytes, topics=sizes, remaining_bytes=remaining_bytes,
                  remaining=remaining, required_bytes=required,
                  replication_factor=rf, brokers=brokers, table=table, skipped_cycles=sorted(skipped))
    msgs = []
    if not ok:
        msgs.append('destination cannot take the %s of source data still to be mirrored (of %s) x RF %d + %s%% margin'
                    ' = %s (%s per broker):'
                    % (_human(remaining_bytes), _human(source_bytes), rf, p['margin_percent'], _human(required), _human(share)))
    if p['local_path']:
        probe, free = local_free(p['local_path'])
        need = p['local_min_free_mb'] * 1024 * 1024
        result['local'] = dict(path=p['local_path'], measured_path=probe, free_bytes=free, required_bytes=need, ok=free >= need)
        if free < need:
            ok = False
            msgs.append('local path %s has %s free, %s required' % (p['local_path'], _human(free), _human(need)))
    result['ok'] = ok
    if not ok and p['fail_on_insufficient']:
        module.fail_json(msg='\n'.join(msgs + table), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
