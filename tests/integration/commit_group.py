"""Commit a consumer group's offsets without joining it, as kafka-mirror commits its lag group.

Usage: commit_group.py PORT GROUP TOPIC:PARTITION=OFFSET|end ...   (end: the partition's end offset)
"""
import sys

from confluent_kafka import Consumer, TopicPartition

consumer = Consumer({'bootstrap.servers': '127.0.0.1:%s' % sys.argv[1], 'group.id': sys.argv[2],
                     'enable.auto.commit': False})
offsets = []
for arg in sys.argv[3:]:
    where, offset = arg.split('=')
    topic, partition = where.rsplit(':', 1)
    if offset == 'end':
        offset = consumer.get_watermark_offsets(TopicPartition(topic, int(partition)), timeout=30)[1]
    offsets.append(TopicPartition(topic, int(partition), int(offset)))
consumer.commit(offsets=offsets, asynchronous=False)
consumer.close()
print('committed %s' % ', '.join('%s:%d=%d' % (tp.topic, tp.partition, tp.offset) for tp in offsets))
