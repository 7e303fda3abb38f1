package io.kafkamirror.source;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * Where a stream stands: the next offset of every source partition, written as Spark's own Kafka
 * source writes it ({@code {"topic":{"0":12,"1":40}}}), so checkpoints and progress reports read
 * the same whichever of the two sources wrote them.
 */
public final class PartitionOffsets extends Offset {
  /** Kafka's sentinel for "the partition's log start", as in {@code startingOffsets}. */
  public static final long EARLIEST = -2L;
  /** Kafka's sentinel for "the partition's end", as in {@code startingOffsets}. */
  public static final long LATEST = -1L;

  static final Comparator<TopicPartition> ORDER =
      Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Map<TopicPartition, Long> offsets;

  public PartitionOffsets(Map<TopicPartition, Long> offsets) {
    TreeMap<TopicPartition, Long> sorted = new TreeMap<>(ORDER);
    sorted.putAll(offsets);
    this.offsets = Collections.unmodifiableMap(sorted);
  }

  public Map<TopicPartition, Long> offsets() {
    return offsets;
  }

  @Override
  public String json() {
    Map<String, Map<String, Long>> nested = new LinkedHashMap<>();
    offsets.forEach((tp, offset) ->
        nested.computeIfAbsent(tp.topic(), t -> new LinkedHashMap<>())
            .put(Integer.toString(tp.partition()), offset));
    try {
      return JSON.writeValueAsString(nested);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Parses {@link #json()} (or a {@code startingOffsets} value), naming the text when it fails. */
  public static PartitionOffsets parse(String json) {
    Map<String, Map<String, Long>> nested;
    try {
      nested = JSON.readValue(json, new TypeReference<Map<String, Map<String, Long>>>() {});
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "expected partition offsets like {\"topic\":{\"0\":23}}, got " + json, e);
    }
    Map<TopicPartition, Long> offsets = new LinkedHashMap<>();
    nested.forEach((topic, partitions) -> partitions.forEach((partition, offset) ->
        offsets.put(new TopicPartition(topic, Integer.parseInt(partition)), offset)));
    return new PartitionOffsets(offsets);
  }
}
