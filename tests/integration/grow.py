import sys

from confluent_kafka.admin import AdminClient, NewPartitions

s = AdminClient({'bootstrap.servers': '127.0.0.1:%s' % sys.argv[1]})
d = AdminClient({'bootstrap.servers': '127.0.0.1:%s' % sys.argv[2]})
s.create_partitions([NewPartitions('orders', 5)])['orders'].result()
d.create_partitions([NewPartitions('src.payments', 4)])['src.payments'].result()
