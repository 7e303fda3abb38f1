"""Topics of the clusters of tests/integration/flows_topology.yml.
  flows_topics.py seed ALIAS=PORT ...   create the source topics of the test (existing ones are kept)
                                        and write a few records to each
  flows_topics.py list ALIAS=PORT ...   print {alias: {topic: partition count}} as JSON, for the
                                        topics of this test only (names with xo-: the clusters may
                                        hold other tests' topics)"""
import json
import sys

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

# alias -> {topic: partitions}: what each cluster holds before any flow runs
SOURCE_TOPICS = {
    'xa': {'xo-orders': 3, 'xo-payments': 2},
    'xb': {'xo-clicks': 4},
    'xc': {'xo-audit': 5},
}


def clusters(args):
    return dict((a.split('=', 1)[0], '127.0.0.1:%s' % a.split('=', 1)[1]) for a in args)


def seed(bootstrap_by_alias):
    for alias, bootstrap in sorted(bootstrap_by_alias.items()):
        admin = AdminClient({'bootstrap.servers': bootstrap})
        topics = SOURCE_TOPICS[alias]
        futures = admin.create_topics([NewTopic(t, n, 1) for t, n in sorted(topics.items())])
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as e:
                if 'TOPIC_ALREADY_EXISTS' not in str(e):
                    raise
        producer = Producer({'bootstrap.servers': bootstrap})
        for topic, partitions in sorted(topics.items()):
            for i in range(100 * partitions):
                producer.produce(topic, value=b'r' * 200, partition=i % partitions)
        producer.flush(60)
    print('seeded')


def list_topics(bootstrap_by_alias):
    out = {}
    for alias, bootstrap in sorted(bootstrap_by_alias.items()):
        md = AdminClient({'bootstrap.servers': bootstrap}).list_topics(timeout=30)
        out[alias] = dict((name, len(t.partitions)) for name, t in sorted(md.topics.items())
                          if 'xo-' in name)
    print(json.dumps(out, sort_keys=True))


if __name__ == '__main__':
    {'seed': seed, 'list': list_topics}[sys.argv[1]](clusters(sys.argv[2:]))
