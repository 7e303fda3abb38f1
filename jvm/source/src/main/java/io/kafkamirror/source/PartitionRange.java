package io.kafkamirror.source;

import java.io.Serializable;
import org.apache.kafka.common.TopicPartition;

/**
 * Offsets {@code from} (inclusive; {@link PartitionOffsets#EARLIEST} for the log start) to
 * {@code until} (exclusive; {@link Long#MAX_VALUE} in real-time mode) of one source partition.
 */
public record PartitionRange(TopicPartition partition, long from, long until)
    implements Serializable {}
