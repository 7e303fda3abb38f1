package io.kafkamirror;

import org.apache.kafka.common.TopicPartition;

/**
 * The partitions and numbers the Python side passes to this package's helpers, as one string
 * each: py4j converts a Python list to a Java list one element per round trip (thousands of
 * calls at thousands of partitions), a string in one. Partitions are {@code topic:partition}
 * comma-separated (a topic name holds only letters, digits, '.', '_' and '-'); numbers are
 * comma-separated.
 */
public final class PartitionList {

  private PartitionList() {}

  /** {@code "a:0,a:1,b.c:7"} as partitions, in order; the empty string as none. */
  public static TopicPartition[] parse(String text) {
    if (text.isEmpty()) {
      return new TopicPartition[0];
    }
    String[] items = text.split(",", -1);
    TopicPartition[] out = new TopicPartition[items.length];
    for (int i = 0; i < items.length; i++) {
      int colon = items[i].lastIndexOf(':');
      if (colon <= 0) {
        throw new IllegalArgumentException("not topic:partition: '" + items[i] + "'");
      }
      out[i] = new TopicPartition(
          items[i].substring(0, colon), Integer.parseInt(items[i].substring(colon + 1)));
    }
    return out;
  }

  /** {@code "1,2,3"} as numbers, exactly {@code expected} of them. */
  public static long[] numbers(String text, int expected) {
    String[] items = text.isEmpty() ? new String[0] : text.split(",", -1);
    if (items.length != expected) {
      throw new IllegalArgumentException(
          items.length + " numbers for " + expected + " partitions");
    }
    long[] out = new long[items.length];
    for (int i = 0; i < items.length; i++) {
      out[i] = Long.parseLong(items[i]);
    }
    return out;
  }
}
