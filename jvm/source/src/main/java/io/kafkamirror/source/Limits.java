package io.kafkamirror.source;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;

/** {@code maxOffsetsPerTrigger}: a batch's records shared among partitions by their backlog. */
final class Limits {
  private Limits() {}

  /**
   * The end offsets of a batch of at most {@code max} records from {@code start}: each partition
   * gets its share of {@code max} in proportion to its backlog (rounded down), and what rounding
   * left goes one record at a time to the partitions in order, so the batch is never empty while
   * records wait.
   */
  static Map<TopicPartition, Long> limited(
      Map<TopicPartition, Long> start, Map<TopicPartition, Long> ends, long max) {
    long total = 0;
    Map<TopicPartition, Long> backlog = new LinkedHashMap<>();
    for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
      long from = start.getOrDefault(end.getKey(), end.getValue());
      long waiting = Math.max(0, end.getValue() - from);
      backlog.put(end.getKey(), waiting);
      total += waiting;
    }
    if (total <= max) {
      return ends;
    }
    Map<TopicPartition, Long> limited = new LinkedHashMap<>();
    long given = 0;
    List<TopicPartition> room = new ArrayList<>();
    for (Map.Entry<TopicPartition, Long> entry : backlog.entrySet()) {
      TopicPartition tp = entry.getKey();
      long share = (long) Math.floor((double) max * entry.getValue() / total);
      share = Math.min(share, entry.getValue());
      given += share;
      long from = start.getOrDefault(tp, ends.get(tp));
      limited.put(tp, entry.getValue() == 0 ? ends.get(tp) : from + share);
      if (share < entry.getValue()) {
        room.add(tp);
      }
    }
    for (int i = 0; given < max && i < room.size(); i++, given++) {
      TopicPartition tp = room.get(i);
      limited.put(tp, limited.get(tp) + 1);
    }
    return limited;
  }
}
