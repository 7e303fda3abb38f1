"""Create the selected test topics on the source cluster (idempotent)."""
import sys

from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1]
a = AdminClient({"bootstrap.servers": bootstrap})
existing = set(a.list_topics(timeout=30).topics)
want = [NewTopic("molecule.orders", 3, 1), NewTopic("molecule.events", 2, 1, config={"retention.ms": "604800000"}),
        NewTopic("other.not-selected", 1, 1)]
todo = [t for t in want if t.topic not in existing]
for name, fut in (a.create_topics(todo, operation_timeout=30).items() if todo else []):
    fut.result()
print("created" if todo else "unchanged")
