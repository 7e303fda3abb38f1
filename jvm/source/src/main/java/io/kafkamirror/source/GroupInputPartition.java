package io.kafkamirror.source;

import java.util.List;
import java.util.Map;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One Spark task's work: a group of source partitions read through one Kafka consumer. {@code
 * consumerKey} names the consumer in the executor's {@link ConsumerPool}: the same group of the
 * same stream gets the same consumer (and its fetch session and prefetched records) batch after
 * batch. {@code writeGate} names the flow's {@link WriteGate} (null: none), {@code run} the query
 * run whose open readers {@link OpenReaders} counts (null: not counted).
 */
public record GroupInputPartition(
    String consumerKey,
    List<PartitionRange> ranges,
    Map<String, String> kafkaParams,
    long pollTimeoutMs,
    boolean failOnDataLoss,
    String writeGate,
    String run)
    implements InputPartition {}
