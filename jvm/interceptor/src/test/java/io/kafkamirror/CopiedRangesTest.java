package io.kafkamirror;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

class CopiedRangesTest {

  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  private static TimestampRestoringInterceptor interceptor(String run) {
    TimestampRestoringInterceptor interceptor = new TimestampRestoringInterceptor();
    Map<String, Object> configs = new HashMap<>();
    configs.put(CopiedRanges.RUN_CONFIG, run);
    interceptor.configure(configs);
    return interceptor;
  }

  private static ProducerRecord<byte[], byte[]> send(
      TimestampRestoringInterceptor interceptor, int partition, long sourceOffset) {
    RecordHeaders headers = new RecordHeaders();
    headers.add("user", b("u"));
    headers.add(TimestampRestoringInterceptor.TIMESTAMP_HEADER, b("1700000000000"));
    headers.add(TimestampRestoringInterceptor.OFFSET_HEADER, b(Long.toString(sourceOffset)));
    return interceptor.onSend(new ProducerRecord<>("t", partition, null, b("k"), b("v"), headers));
  }

  private static void ack(TimestampRestoringInterceptor interceptor, int partition, long offset,
      Exception error) {
    interceptor.onAcknowledgement(
        new RecordMetadata(new TopicPartition("t", partition), offset, 0, -1L, 1, 1), error);
  }

  @Test
  void bothMarkersStrippedAndTimestampSet() {
    ProducerRecord<byte[], byte[]> out = send(interceptor("strip"), 0, 7);
    assertEquals(1700000000000L, out.timestamp());
    Header[] headers = out.headers().toArray();
    assertEquals(1, headers.length);
    assertEquals("user", headers[0].key());
    CopiedRanges.forget("strip");
  }

  @Test
  void offsetMarkerStrippedWithoutRun() {
    ProducerRecord<byte[], byte[]> out = send(new TimestampRestoringInterceptor(), 0, 7);
    assertEquals(1, out.headers().toArray().length);
    assertEquals(1700000000000L, out.timestamp());
  }

  @Test
  void consecutiveOffsetsMapOneToOneAndGapsStartNewRanges() {
    TimestampRestoringInterceptor interceptor = interceptor("gaps");
    for (long source : new long[] {10, 11, 12, 15, 16}) {
      send(interceptor, 1, source);
    }
    // the target holds a foreign record at 103: 16 lands at 104
    for (long target : new long[] {100, 101, 102, 103, 105}) {
      ack(interceptor, 1, target, null);
    }
    assertEquals(
        "t\t1\t10\t13\t100\t103\t1\t3\t6\t-1\n" + "t\t1\t15\t16\t103\t104\t1\t1\t2\t-1\n"
            + "t\t1\t16\t17\t105\t106\t1\t1\t2\t-1\n",
        CopiedRanges.drain("gaps"));
    assertEquals("", CopiedRanges.drain("gaps"));
    CopiedRanges.forget("gaps");
  }

  @Test
  void aRangeContinuesAcrossDrains() {
    TimestampRestoringInterceptor interceptor = interceptor("across");
    send(interceptor, 0, 0);
    send(interceptor, 0, 1);
    ack(interceptor, 0, 5, null);
    assertEquals("t\t0\t0\t1\t5\t6\t1\t1\t2\t-1\n", CopiedRanges.drain("across"));
    ack(interceptor, 0, 6, null);
    assertEquals("t\t0\t1\t2\t6\t7\t1\t1\t2\t-1\n", CopiedRanges.drain("across"));
    CopiedRanges.forget("across");
  }

  @Test
  void aFailedSendEndsRecordingForThePartition() {
    TimestampRestoringInterceptor interceptor = interceptor("failed");
    send(interceptor, 0, 0);
    send(interceptor, 0, 1);
    send(interceptor, 0, 2);
    assertEquals("", CopiedRanges.failure("failed"));
    ack(interceptor, 0, 0, null);
    ack(interceptor, 0, -1, new IllegalStateException("refused"));
    ack(interceptor, 0, 1, null);
    send(interceptor, 0, 3);
    ack(interceptor, 0, 2, null);
    assertEquals("t\t0\t0\t1\t0\t1\t1\t1\t2\t-1\n", CopiedRanges.drain("failed"));
    // the first failure is kept, with the failed record's source offset, until the run ends
    assertEquals("t\t0\t1\tIllegalStateException: refused", CopiedRanges.failure("failed"));
    CopiedRanges.forget("failed");
    assertEquals("", CopiedRanges.failure("failed"));
  }

  @Test
  void pendingCountsRecordsSentAndNotYetAcknowledged() {
    TimestampRestoringInterceptor interceptor = interceptor("pending");
    assertEquals(0, CopiedRanges.pending("pending"));
    send(interceptor, 0, 0);
    send(interceptor, 0, 1);
    send(interceptor, 1, 0);
    assertEquals(3, CopiedRanges.pending("pending"));
    ack(interceptor, 0, 0, null);
    ack(interceptor, 1, 0, null);
    assertEquals(1, CopiedRanges.pending("pending"));
    ack(interceptor, 0, 1, null);
    assertEquals(0, CopiedRanges.pending("pending"));
    send(interceptor, 1, 1);
    ack(interceptor, 1, -1, new RuntimeException("refused"));
    send(interceptor, 1, 2);
    assertEquals(0, CopiedRanges.pending("pending"));
    CopiedRanges.forget("pending");
  }

  @Test
  void manyRangesMergeOldestIntoOneThatDoesNotMapOneToOne() {
    CopiedRanges.Tracker tracker = CopiedRanges.tracker("many", "t", 0);
    for (int i = 0; i < CopiedRanges.MAX_RANGES + 2; i++) {
      tracker.sent(2L * i);
      tracker.acknowledged(i, null, 10, i);
    }
    java.util.List<long[]> ranges = tracker.drain();
    assertEquals(CopiedRanges.MAX_RANGES, ranges.size());
    assertArrayEquals(new long[] {0, 5, 0, 3, 0, 3, 30, 2}, ranges.get(0));
    assertArrayEquals(new long[] {6, 7, 3, 4, 1, 1, 10, 3}, ranges.get(1));
    CopiedRanges.forget("many");
  }

  @Test
  void executorsRangesReachTheDriversDrain() {
    Map<String, String> sent = new HashMap<>();
    sent.put("remote-run", "t\t3\t0\t2\t0\t2\t1\t2\t9\t40\n");
    CopiedRanges.remote(sent);
    CopiedRanges.remote(sent);
    assertEquals("t\t3\t0\t2\t0\t2\t1\t2\t9\t40\nt\t3\t0\t2\t0\t2\t1\t2\t9\t40\n",
        CopiedRanges.drain("remote-run"));
    assertEquals("", CopiedRanges.drain("remote-run"));
  }
}
