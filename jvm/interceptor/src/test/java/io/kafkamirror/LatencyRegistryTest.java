package io.kafkamirror;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class LatencyRegistryTest {

  private static final String FLOW = "a->b";

  @AfterEach
  void clear() {
    LatencyRegistry.clear();
  }

  private static RecordMetadata acked(String topic, long timestamp) {
    return new RecordMetadata(new TopicPartition(topic, 0), 0L, 0, timestamp, 1, 1);
  }

  private static TimestampRestoringInterceptor interceptor(Map<String, ?> configs) {
    TimestampRestoringInterceptor interceptor = new TimestampRestoringInterceptor();
    interceptor.configure(configs);
    return interceptor;
  }

  @Test
  void bucketsMatchThePythonBuckets() {
    // kafka_mirror.metrics.LATENCY_BUCKETS, in ms
    assertArrayEquals(
        new long[] {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000},
        LatencyRegistry.BOUNDS_MS);
  }

  @Test
  void latenciesFallInTheirBucketsWithCountAndSum() {
    for (long ms : new long[] {0, 5, 6, 10, 99, 100, 101, 300_000, 300_001, -7}) {
      LatencyRegistry.record(FLOW, "b.t", ms);
    }
    long[] v = LatencyRegistry.merged().get(LatencyRegistry.key(FLOW, "b.t"));
    // <=5: 0, 5, -7 (as 0); <=10: 6, 10; <=100: 99, 100; <=250: 101; <=300000; above: 1
    assertArrayEquals(new long[] {3, 2, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 10,
        5 + 6 + 10 + 99 + 100 + 101 + 300_000 + 300_001}, v);
  }

  @Test
  void interceptorRecordsAcknowledgedRecordsPerTopicWhenEnabled() {
    TimestampRestoringInterceptor on =
        interceptor(Map.of(TimestampRestoringInterceptor.LATENCY_FLOW_CONFIG, FLOW));
    long now = System.currentTimeMillis();
    on.onAcknowledgement(acked("b.t", now - 45_000), null);
    on.onAcknowledgement(acked("b.t", now - 45_000), null);
    on.onAcknowledgement(acked("b.u", now), null);
    on.onAcknowledgement(acked("b.u", now), new RuntimeException("not acknowledged"));
    on.onAcknowledgement(acked("b.u", -1), null); // no timestamp
    Map<String, long[]> merged = LatencyRegistry.merged();
    assertEquals(2, merged.size());
    long[] t = merged.get(LatencyRegistry.key(FLOW, "b.t"));
    assertEquals(2, t[LatencyRegistry.WIDTH - 2]);
    assertEquals(2, t[LatencyRegistry.BOUNDS_MS.length - 2]); // (30 s, 60 s]
    assertTrue(t[LatencyRegistry.WIDTH - 1] >= 90_000);
    assertEquals(1, merged.get(LatencyRegistry.key(FLOW, "b.u"))[LatencyRegistry.WIDTH - 2]);
    String text = LatencyRegistry.render();
    assertTrue(text.startsWith("a->b\tb.t\t0,0,0,0,0,0,0,0,0,0,0,0,2,0,0,2,"), text);
    assertEquals(2, text.split("\n").length);
  }

  @Test
  void disabledByDefault() {
    TimestampRestoringInterceptor off = interceptor(new HashMap<>());
    off.onAcknowledgement(acked("b.t", 1L), null);
    new TimestampRestoringInterceptor().onAcknowledgement(acked("b.t", 1L), null);
    interceptor(Map.of(TimestampRestoringInterceptor.LATENCY_FLOW_CONFIG, " "))
        .onAcknowledgement(acked("b.t", 1L), null);
    assertTrue(LatencyRegistry.merged().isEmpty());
    assertEquals("", LatencyRegistry.render());
  }

  @Test
  void neverThrows() {
    TimestampRestoringInterceptor on =
        interceptor(Map.of(TimestampRestoringInterceptor.LATENCY_FLOW_CONFIG, FLOW));
    assertDoesNotThrow(() -> on.onAcknowledgement(null, null));
    assertDoesNotThrow(() -> on.onAcknowledgement(null, new RuntimeException("x")));
    assertDoesNotThrow(() -> on.onAcknowledgement(
        new RecordMetadata(null, 0L, 0, 5L, 1, 1), null)); // no topic partition
    assertDoesNotThrow(() -> interceptor(null).onAcknowledgement(acked("b.t", 1L), null));
    assertDoesNotThrow(() -> LatencyRegistry.record(null, null, 1));
  }

  /** An executor's snapshot of flow FLOW, topic b.t: {@code count} records in one bucket. */
  private static HashMap<String, long[]> oneBucket(int bucket, long count, long sumMs) {
    long[] counts = new long[LatencyRegistry.WIDTH];
    counts[bucket] = count;
    counts[LatencyRegistry.WIDTH - 2] = count;
    counts[LatencyRegistry.WIDTH - 1] = sumMs;
    HashMap<String, long[]> snapshot = new HashMap<>();
    snapshot.put(LatencyRegistry.key(FLOW, "b.t"), counts);
    return snapshot;
  }

  @Test
  void driverSumsItsOwnCountsAndEachExecutorsLatestSnapshot() {
    LatencyRegistry.record(FLOW, "b.t", 1);
    LatencyPlugin.Driver driver = new LatencyPlugin.Driver();
    HashMap<String, long[]> first = oneBucket(1, 3, 21);
    driver.receive(new LatencyRegistry.Snapshot("1", first));
    driver.receive(new LatencyRegistry.Snapshot("1", first)); // cumulative: replaces
    driver.receive(new LatencyRegistry.Snapshot("2", first));
    driver.receive("something else");
    long[] v = LatencyRegistry.merged().get(LatencyRegistry.key(FLOW, "b.t"));
    assertEquals(1, v[0]);
    assertEquals(6, v[1]);
    assertEquals(7, v[LatencyRegistry.WIDTH - 2]);
    assertEquals(43, v[LatencyRegistry.WIDTH - 1]);
  }

  @Test
  void removedExecutorsCountsStayInOneSumAndTheirLateSnapshotsAreNotCountedAgain() {
    LatencyPlugin.Driver driver = new LatencyPlugin.Driver();
    HashMap<String, long[]> snapshot = oneBucket(2, 5, 100);
    for (int executor = 0; executor < 3 * LatencyRegistry.RETIRED_IDS_KEPT; executor++) {
      driver.receive(new LatencyRegistry.Snapshot(Integer.toString(executor), snapshot));
      new LatencyPlugin.Retirements().onExecutorRemoved(
          new org.apache.spark.scheduler.SparkListenerExecutorRemoved(0L,
              Integer.toString(executor), "lost"));
    }
    driver.receive(new LatencyRegistry.Snapshot("live", snapshot));
    // a snapshot that was on its way when its executor was removed
    driver.receive(new LatencyRegistry.Snapshot(
        Integer.toString(3 * LatencyRegistry.RETIRED_IDS_KEPT - 1), snapshot));
    assertEquals(1, LatencyRegistry.executorsKept());
    long[] v = LatencyRegistry.merged().get(LatencyRegistry.key(FLOW, "b.t"));
    long executors = 3L * LatencyRegistry.RETIRED_IDS_KEPT + 1;
    assertEquals(5 * executors, v[2]);
    assertEquals(5 * executors, v[LatencyRegistry.WIDTH - 2]);
    assertEquals(100 * executors, v[LatencyRegistry.WIDTH - 1]);
  }
}
