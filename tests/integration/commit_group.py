"""Commit a consumer group's offsets without joining it, as kafka-mirror commits its lag group
(an admin's AlterConsumerGroupOffsets).

Usage: commit_group.py PORT GROUP TOPIC:PARTITION=OFFSET|end ...   (end: the partition's end offset)
"""
import sys
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

bootstrap = '127.0.0.1:%s' % sys.argv[1]
offsets = []
ends = None
for arg in sys.argv[3:]:
    where, offset = arg.split('=')
    topic, partition = where.rsplit(':', 1)
    if offset == 'end':
        if ends is None:
            ends = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'commit-group.reader'})
        offset = ends.get_watermark_offsets(TopicPartition(topic, int(partition)), timeout=30)[1]
    offsets.append(TopicPartition(topic, int(partition), int(offset)))
if ends is not None:
    ends.close()
admin = AdminClient({'bootstrap.servers': bootstrap})
# the group coordinator loading or moving: retried, as kafka-mirror retries it
BUSY = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR}
deadline = time.monotonic() + 60
while True:
    result = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(sys.argv[2], offsets)],
                                                request_timeout=30)[sys.argv[2]].result()
    refused = [tp for tp in result.topic_partitions if tp.error is not None]
    if not refused:
        break
    if time.monotonic() > deadline or any(tp.error.code() not in BUSY for tp in refused):
        sys.exit('refused: %s' % ', '.join('%s:%d %s' % (tp.topic, tp.partition, tp.error) for tp in refused))
    time.sleep(0.5)
print('committed %s' % ', '.join('%s:%d=%d' % (tp.topic, tp.partition, tp.offset) for tp in offsets))
