"""Seed the source cluster of tests/integration/modules.yml: four topics and 3000 records."""
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = '127.0.0.1:%s' % sys.argv[1]
admin = AdminClient({'bootstrap.servers': bootstrap})
futures = admin.create_topics([
    NewTopic('orders', 3, 1, config={'retention.ms': '86400000', 'min.insync.replicas': '1'}),
    NewTopic('payments', 2, 1),
    NewTopic('ignored.internal', 1, 1),
    NewTopic('dst.loop', 1, 1),
])
for name, future in futures.items():
    future.result()
producer = Producer({'bootstrap.servers': bootstrap})
for i in range(3000):
    producer.produce('orders', value=b'x' * 500, partition=i % 3)
producer.flush()
print('seeded')
