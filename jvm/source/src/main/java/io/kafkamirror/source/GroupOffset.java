package io.kafkamirror.source;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/** Where one group's reader stands in real-time mode: the next offset of each of its partitions. */
public final class GroupOffset implements PartitionOffset {
  private static final long serialVersionUID = 1L;

  private final HashMap<TopicPartition, Long> offsets;

  public GroupOffset(Map<TopicPartition, Long> offsets) {
    this.offsets = new HashMap<>(offsets);
  }

  public Map<TopicPartition, Long> offsets() {
    return offsets;
  }
}
