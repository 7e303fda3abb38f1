"""The data path: one Spark Structured Streaming query per replication flow."""
