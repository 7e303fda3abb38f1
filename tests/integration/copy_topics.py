"""Copy source topics to their destination names, partition for partition (what a mirror does),
for the disk_headroom test of tests/integration/modules.yml: copy_topics.py SRC_PORT DST_PORT
PREFIX TOPIC..."""
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

src_port, dst_port, prefix, topics = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
consumer = Consumer({'bootstrap.servers': '127.0.0.1:%s' % src_port, 'group.id': 'copy-topics',
                     'enable.auto.commit': False, 'enable.partition.eof': True})
producer = Producer({'bootstrap.servers': '127.0.0.1:%s' % dst_port})
copied = 0
for topic in topics:
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    left = set(partitions)
    while left:
        msg = consumer.poll(10)
        if msg is None:
            raise SystemExit('no record within 10 s while copying %s' % topic)
        if msg.error():
            left.discard(msg.partition())
            continue
        producer.produce(prefix + topic, key=msg.key(), value=msg.value(), partition=msg.partition())
        producer.poll(0)
        copied += 1
producer.flush(60)
consumer.close()
print('copied %d records' % copied)
