package io.kafkamirror;

import java.io.Serializable;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Replication latency per flow and destination topic, recorded by {@link
 * TimestampRestoringInterceptor} when the target acknowledged a record: now minus the record's
 * (restored, source) timestamp. One JVM-wide registry; lock-free on the recording path ({@link
 * LongAdder}s in a {@link ConcurrentHashMap}), never throws.
 *
 * <p>Buckets are the Python side's {@code kafka_mirror.metrics.LATENCY_BUCKETS} in milliseconds;
 * counts per bucket are not cumulative here (the last one is above the largest bound). On the
 * driver, {@link #render()} adds the latest cumulative snapshots executors in other JVMs sent
 * through {@link LatencyPlugin}.
 */
public final class LatencyRegistry {

  /** Upper bounds (inclusive) of the histogram buckets, milliseconds. */
  static final long[] BOUNDS_MS = {
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000
  };

  /** Per bucket (the last: above every bound), then count, then sum of latencies in ms. */
  static final int WIDTH = BOUNDS_MS.length + 3;

  private static final class Histogram {
    final LongAdder[] cells = new LongAdder[WIDTH];

    Histogram() {
      for (int i = 0; i < WIDTH; i++) {
        cells[i] = new LongAdder();
      }
    }

    void record(long latencyMs) {
      int i = 0;
      while (i < BOUNDS_MS.length && latencyMs > BOUNDS_MS[i]) {
        i++;
      }
      cells[i].increment();
      cells[WIDTH - 2].increment();
      cells[WIDTH - 1].add(latencyMs);
    }

    long[] values() {
      long[] out = new long[WIDTH];
      for (int i = 0; i < WIDTH; i++) {
        out[i] = cells[i].sum();
      }
      return out;
    }
  }

  // key: flow + '\t' + destination topic (neither holds a tab)
  private static final ConcurrentHashMap<String, Histogram> LOCAL = new ConcurrentHashMap<>();
  // driver only: the latest snapshot of each executor in another JVM that is still there, the
  // last snapshots of the executors that were removed summed per flow and topic (the counters
  // stay cumulative, and what is kept does not grow with every executor ever seen), and the ids
  // of the latest removed ones (a snapshot still on its way from one of them is not counted
  // again); all three under REMOTE_LOCK
  private static final Object REMOTE_LOCK = new Object();
  private static final HashMap<String, Map<String, long[]>> REMOTE = new HashMap<>();
  private static final HashMap<String, long[]> RETIRED = new HashMap<>();
  static final int RETIRED_IDS_KEPT = 1_024;
  private static final LinkedHashMap<String, Boolean> RETIRED_IDS =
      new LinkedHashMap<>(16, 0.75f, false) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
          return size() > RETIRED_IDS_KEPT;
        }
      };

  private LatencyRegistry() {}

  static String key(String flow, String topic) {
    return flow + '\t' + topic;
  }

  /** Records one acknowledged record; a negative latency (clock skew) counts as 0. */
  public static void record(String flow, String topic, long latencyMs) {
    if (flow == null || topic == null) {
      return;
    }
    String key = key(flow, topic);
    Histogram histogram = LOCAL.get(key);
    if (histogram == null) {
      histogram = LOCAL.computeIfAbsent(key, k -> new Histogram());
    }
    histogram.record(Math.max(0L, latencyMs));
  }

  /** The recording path of one flow: its topics' histograms without building a key per record. */
  static final class FlowRecorder {
    private final String flow;
    private final ConcurrentHashMap<String, Histogram> topics = new ConcurrentHashMap<>();

    FlowRecorder(String flow) {
      this.flow = flow;
    }

    void record(String topic, long latencyMs) {
      if (topic == null) {
        return;
      }
      Histogram histogram = topics.get(topic);
      if (histogram == null) {
        histogram = topics.computeIfAbsent(
            topic, t -> LOCAL.computeIfAbsent(key(flow, t), k -> new Histogram()));
      }
      histogram.record(Math.max(0L, latencyMs));
    }
  }

  /** This JVM's cumulative counts, per flow and topic (serializable, for the plugin). */
  public static HashMap<String, long[]> snapshot() {
    HashMap<String, long[]> out = new HashMap<>();
    for (Map.Entry<String, Histogram> entry : LOCAL.entrySet()) {
      out.put(entry.getKey(), entry.getValue().values());
    }
    return out;
  }

  static boolean isEmpty() {
    return LOCAL.isEmpty();
  }

  /** The latest cumulative snapshot an executor (in another JVM) sent. */
  static void remote(String executor, Map<String, long[]> snapshot) {
    if (executor != null && snapshot != null) {
      synchronized (REMOTE_LOCK) {
        if (!RETIRED_IDS.containsKey(executor)) {
          REMOTE.put(executor, snapshot);
        }
      }
    }
  }

  /** An executor was removed: its last snapshot joins the removed executors' sum. */
  static void retire(String executor) {
    if (executor == null) {
      return;
    }
    synchronized (REMOTE_LOCK) {
      RETIRED_IDS.put(executor, Boolean.TRUE);
      Map<String, long[]> last = REMOTE.remove(executor);
      if (last != null) {
        add(RETIRED, last);
      }
    }
  }

  /** How many executors' snapshots the driver keeps one by one (tests). */
  public static int executorsKept() {
    synchronized (REMOTE_LOCK) {
      return REMOTE.size();
    }
  }

  private static void add(Map<String, long[]> sums, Map<String, long[]> snapshot) {
    for (Map.Entry<String, long[]> entry : snapshot.entrySet()) {
      long[] values = entry.getValue();
      if (values == null || values.length != WIDTH) {
        continue;
      }
      long[] sum = sums.computeIfAbsent(entry.getKey(), k -> new long[WIDTH]);
      for (int i = 0; i < WIDTH; i++) {
        sum[i] += values[i];
      }
    }
  }

  /**
   * This JVM's counts plus every executor's latest snapshot (those removed included), summed per
   * flow and topic.
   */
  public static Map<String, long[]> merged() {
    TreeMap<String, long[]> out = new TreeMap<>(snapshot());
    synchronized (REMOTE_LOCK) {
      add(out, RETIRED);
      for (Map<String, long[]> snapshot : REMOTE.values()) {
        add(out, snapshot);
      }
    }
    return out;
  }

  /**
   * {@link #merged()} as text, one line per flow and topic: {@code flow TAB topic TAB} the
   * comma-separated bucket counts (not cumulative, the last above every bound), count and sum
   * (ms). One call through py4j per scrape.
   */
  public static String render() {
    StringBuilder out = new StringBuilder();
    for (Map.Entry<String, long[]> entry : merged().entrySet()) {
      out.append(entry.getKey()).append('\t');
      long[] values = entry.getValue();
      for (int i = 0; i < values.length; i++) {
        if (i > 0) {
          out.append(',');
        }
        out.append(values[i]);
      }
      out.append('\n');
    }
    return out.toString();
  }

  /** Forgets everything (tests; interceptors configured before keep recording elsewhere). */
  static void clear() {
    LOCAL.clear();
    synchronized (REMOTE_LOCK) {
      REMOTE.clear();
      RETIRED.clear();
      RETIRED_IDS.clear();
    }
  }

  /** What an executor plugin sends the driver plugin. */
  static final class Snapshot implements Serializable {
    private static final long serialVersionUID = 1L;
    final String executor;
    final HashMap<String, long[]> counts;

    Snapshot(String executor, HashMap<String, long[]> counts) {
      this.executor = executor;
      this.counts = counts;
    }
  }
}
