"""kafka.mirror: mirror Kafka topics between clusters with Spark Structured Streaming."""

__version__ = "0.1.0"
