package io.kafkamirror.bench;

import java.util.Arrays;

/** Nanosecond latencies (thread-safe); their p50, p99 and max in ms, nearest rank. */
final class Latencies {

  private long[] values = new long[1024];
  private int size;

  synchronized void add(long nanos) {
    if (size == values.length) {
      values = Arrays.copyOf(values, size * 2);
    }
    values[size++] = nanos;
  }

  /** {@code "P50 P99 MAX"} in ms with 3 decimals, or {@code "- - -"} when empty. */
  synchronized String summary() {
    if (size == 0) {
      return "- - -";
    }
    long[] sorted = Arrays.copyOf(values, size);
    Arrays.sort(sorted);
    return ms(rank(sorted, 0.50)) + " " + ms(rank(sorted, 0.99)) + " " + ms(sorted[size - 1]);
  }

  private static long rank(long[] sorted, double q) {
    int index = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
  }

  private static String ms(long nanos) {
    return String.format(java.util.Locale.ROOT, "%.3f", nanos / 1e6);
  }
}
