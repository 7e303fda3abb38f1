package io.kafkamirror;

import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Where each mirrored record landed, for offset translation in real-time mode (no micro-batch
 * boundary to measure the target around). The Spark job adds the source offset as a header;
 * {@link TimestampRestoringInterceptor} strips it and calls {@link Tracker#sent} when the
 * record is sent and {@link Tracker#acknowledged} when the target acknowledged (or failed) it.
 * The producer acknowledges the records of one partition in the order they were sent, so the
 * oldest offset waiting is the acknowledged record's source offset.
 *
 * <p>Per query run (the {@value #RUN_CONFIG} producer config, one value per start of a flow's
 * query, hence one producer per run) and target partition, consecutive records whose source and
 * target offsets both grow by one form one range that maps one to one; an offset gap on either
 * side starts a new range. After a failed send the partition records nothing more in this run
 * (what follows may be paired wrongly). At most {@link #MAX_RANGES} ranges wait per partition:
 * beyond that the two oldest merge into one that does not map one to one (its start still holds:
 * every record at or after its source start is at or after its target start).
 *
 * <p>{@link #drain(String)} hands the ranges to the driver's Python side; executors in other JVMs
 * send theirs with {@link LatencyPlugin}.
 */
public final class CopiedRanges {

  /** Producer config key naming the query run whose copies to record (absent: not recorded). */
  public static final String RUN_CONFIG = "kafka-mirror.copies.run";

  static final int MAX_RANGES = 64;

  // run -> target topic TAB partition -> tracker
  private static final ConcurrentHashMap<String, ConcurrentHashMap<String, Tracker>> RUNS =
      new ConcurrentHashMap<>();
  // driver only: ranges executors in other JVMs sent, per run, as drain() text
  private static final ConcurrentHashMap<String, StringBuilder> REMOTE = new ConcurrentHashMap<>();
  // run -> the first send the target failed in this JVM, as failure() text
  private static final ConcurrentHashMap<String, String> FAILURES = new ConcurrentHashMap<>();

  private CopiedRanges() {}

  /** The tracker of one run's target partition. */
  static Tracker tracker(String run, String topic, int partition) {
    ConcurrentHashMap<String, Tracker> trackers = RUNS.get(run);
    if (trackers == null) {
      trackers = RUNS.computeIfAbsent(run, r -> new ConcurrentHashMap<>());
    }
    String key = topic + '\t' + partition;
    Tracker tracker = trackers.get(key);
    if (tracker == null) {
      tracker = trackers.computeIfAbsent(key, k -> new Tracker(run, topic, partition));
    }
    return tracker;
  }

  /** One target partition of one run. */
  static final class Tracker {
    final String run;
    final String topic;
    final int partition;
    private final ArrayDeque<Long> waiting = new ArrayDeque<>();
    private final List<long[]> ranges = new ArrayList<>();
    private boolean failed;
    // the open range: source and target offset of its first and last record; -1: none
    private long sourceFirst = -1;
    private long sourceLast;
    private long targetFirst;
    private long targetLast;
    // records acknowledged in the open range, and their key and value bytes
    private long records;
    private long size;
    // the largest age (ms) a record of the open range had when acknowledged; -1: none known
    private long oldest = -1;

    Tracker(String run, String topic, int partition) {
      this.run = run;
      this.topic = topic;
      this.partition = partition;
    }

    synchronized void sent(long sourceOffset) {
      if (!failed) {
        waiting.addLast(sourceOffset);
      }
    }

    /** The target acknowledged the oldest record waiting at {@code targetOffset} (negative:
     * unknown), or failed it ({@code error} not null: the first failure of the run is kept for
     * {@link CopiedRanges#failure}); {@code bytes}: the record's key and value sizes;
     * {@code ageMs}: its age (now minus its timestamp; negative: unknown). */
    synchronized void acknowledged(long targetOffset, Exception error, long bytes, long ageMs) {
      if (failed) {
        return;
      }
      Long source = waiting.pollFirst();
      if (error != null) {
        FAILURES.putIfAbsent(run, topic + '\t' + partition + '\t' + (source == null ? -1 : source)
            + '\t' + error.getClass().getSimpleName() + ": " + error.getMessage());
      }
      if (error != null || source == null || targetOffset < 0) {
        failed = true;
        waiting.clear();
        close();
        return;
      }
      if (sourceFirst < 0 || source != sourceLast + 1 || targetOffset != targetLast + 1) {
        close();
        sourceFirst = source;
        targetFirst = targetOffset;
      }
      sourceLast = source;
      targetLast = targetOffset;
      records++;
      size += Math.max(0, bytes);
      oldest = Math.max(oldest, ageMs);
    }

    private void close() {
      if (sourceFirst < 0) {
        return;
      }
      ranges.add(new long[] {
          sourceFirst, sourceLast + 1, targetFirst, targetLast + 1, 1, records, size, oldest});
      sourceFirst = -1;
      records = 0;
      size = 0;
      oldest = -1;
      while (ranges.size() > MAX_RANGES) {
        long[] older = ranges.get(0);
        long[] newer = ranges.remove(1);
        ranges.set(0, new long[] {
            Math.min(older[0], newer[0]), Math.max(older[1], newer[1]), older[2], newer[3], 0,
            older[5] + newer[5], older[6] + newer[6], Math.max(older[7], newer[7])});
      }
    }

    synchronized int waiting() {
      return waiting.size();
    }

    /** The ranges so far, the open one included (the next record continuing it starts a range
     * that continues this one seamlessly). */
    synchronized List<long[]> drain() {
      close();
      List<long[]> out = new ArrayList<>(ranges);
      ranges.clear();
      return out;
    }
  }

  /**
   * This JVM's ranges of {@code run} (and those executors sent), one line each: target topic,
   * partition, source start, source end, target start, target end, 1 when the offsets map one to
   * one (0 otherwise), the records acknowledged in the range, their key and value bytes and
   * the largest age (ms) one had when acknowledged (-1: unknown), tab-separated. Ends are exclusive. One py4j call per drain.
   */
  public static String drain(String run) {
    StringBuilder out = new StringBuilder();
    ConcurrentHashMap<String, Tracker> trackers = RUNS.get(run);
    if (trackers != null) {
      for (Tracker tracker : trackers.values()) {
        for (long[] range : tracker.drain()) {
          line(out, tracker.topic, tracker.partition, range);
        }
      }
    }
    StringBuilder remote = REMOTE.remove(run);
    if (remote != null) {
      synchronized (remote) {
        out.append(remote);
      }
    }
    return out.toString();
  }

  /**
   * Records of {@code run} sent in this JVM that the target has neither acknowledged nor failed
   * yet (a partition that failed a send counts none). A stopped query's producer still delivers
   * them: the driver waits for 0 before its last drain.
   */
  public static int pending(String run) {
    int count = 0;
    ConcurrentHashMap<String, Tracker> trackers = RUNS.get(run);
    if (trackers != null) {
      for (Tracker tracker : trackers.values()) {
        count += tracker.waiting();
      }
    }
    return count;
  }

  /**
   * The first record of {@code run} the target failed in this JVM (the producer gave up on it:
   * its retries and delivery timeout were spent, or the target refused it for good), as target
   * topic, partition, the record's source offset (-1: unknown) and the exception's class and
   * message, tab-separated; empty when none failed. Spark's sink reports the failure only when
   * the task writes its next record or the batch ends, possibly minutes later in real-time mode:
   * the driver asks at every drain.
   */
  public static String failure(String run) {
    String failed = FAILURES.get(run);
    return failed == null ? "" : failed;
  }

  /** Forgets a run (its query stopped and its ranges were drained). */
  public static void forget(String run) {
    RUNS.remove(run);
    REMOTE.remove(run);
    FAILURES.remove(run);
  }

  private static void line(StringBuilder out, String topic, int partition, long[] range) {
    out.append(topic).append('\t').append(partition);
    for (long value : range) {
      out.append('\t').append(value);
    }
    out.append('\n');
  }

  /** Every run's ranges of this JVM (an executor's, for the plugin); empty runs left out. */
  static HashMap<String, String> drainAll() {
    HashMap<String, String> out = new HashMap<>();
    for (String run : RUNS.keySet()) {
      String text = drain(run);
      if (!text.isEmpty()) {
        out.put(run, text);
      }
    }
    return out;
  }

  /** Ranges an executor in another JVM sent (driver side). */
  static void remote(Map<String, String> runs) {
    if (runs == null) {
      return;
    }
    for (Map.Entry<String, String> entry : runs.entrySet()) {
      StringBuilder buffer = REMOTE.computeIfAbsent(entry.getKey(), r -> new StringBuilder());
      synchronized (buffer) {
        buffer.append(entry.getValue());
      }
    }
  }

  /** What an executor plugin sends the driver plugin. */
  static final class Batch implements Serializable {
    private static final long serialVersionUID = 1L;
    final HashMap<String, String> runs;

    Batch(HashMap<String, String> runs) {
      this.runs = runs;
    }
  }
}
