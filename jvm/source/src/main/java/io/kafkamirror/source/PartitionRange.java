package io.kafkamirror.source;

import java.io.Serializable;
import org.apache.kafka.common.TopicPartition;

/**
 * Offsets {@code from} (inclusive; {@link PartitionOffsets#EARLIEST} for the log start) to
 * {@code until} (exclusive; {@link Long#MAX_VALUE} in real-time mode) of one source partition.
 */
public record PartitionRange(TopicPartition partition, long from, long until)
    implements Serializable {

  /** Records the range holds when both ends are known (0 for an unbounded or late-bound one). */
  public long size() {
    return from < 0 || until == Long.MAX_VALUE ? 0 : Math.max(0, until - from);
  }
}
