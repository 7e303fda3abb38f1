package io.kafkamirror;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

class RecordDigestsTest {

  private static final TopicPartition P0 = new TopicPartition("t", 0);
  private static final TopicPartition P1 = new TopicPartition("t", 1);

  private static ConsumerRecord<byte[], byte[]> record(
      TopicPartition tp, long offset, String value, long timestamp) {
    RecordHeaders headers = new RecordHeaders();
    headers.add("h", "1".getBytes(StandardCharsets.US_ASCII));
    headers.add("null", null);
    return new ConsumerRecord<>(tp.topic(), tp.partition(), offset, timestamp,
        TimestampType.CREATE_TIME, 1, value == null ? 0 : value.length(),
        "k".getBytes(StandardCharsets.US_ASCII),
        value == null ? null : value.getBytes(StandardCharsets.US_ASCII), headers,
        Optional.empty());
  }

  @Test
  void manyPartitionsInOnePassFirstAndNthOrShort() {
    MockConsumer<byte[], byte[]> consumer = new MockConsumer<>(OffsetResetStrategy.NONE);
    // partition 0: offsets 10, 12, 13, 20 (gaps); partition 1: one record at 5, its end 6
    consumer.updateEndOffsets(Map.of(P0, 21L, P1, 6L));
    consumer.schedulePollTask(() -> {
      for (long o : new long[] {10, 12, 13, 20}) {
        consumer.addRecord(record(P0, o, "v" + o, 1L));
      }
      consumer.addRecord(record(P1, 5, "w5", 1L));
    });
    String out = RecordDigests.firstAndNth(consumer, "t:0,t:1", "10,5", "3,2", 5_000);
    String[] lines = out.split("\n");
    assertEquals(2, lines.length, out);
    String[] ok = lines[0].split(" ");
    assertEquals("ok", ok[0]);
    assertEquals("10", ok[1]);
    assertEquals(RecordDigests.digest(record(P0, 10, "v10", 1L)), ok[2]);
    assertEquals("13", ok[3]);
    assertEquals(RecordDigests.digest(record(P0, 13, "v13", 1L)), ok[4]);
    assertEquals("short 1 6", lines[1]);
    assertTrue(consumer.assignment().isEmpty());
  }

  @Test
  void aStartAtTheEndIsShortAtOnce() {
    MockConsumer<byte[], byte[]> consumer = new MockConsumer<>(OffsetResetStrategy.NONE);
    consumer.updateEndOffsets(Map.of(P0, 7L));
    assertEquals("short 0 7", RecordDigests.firstAndNth(consumer, "t:0", "7", "1", 5_000));
  }

  @Test
  void noProgressTimesOut() {
    MockConsumer<byte[], byte[]> consumer = new MockConsumer<>(OffsetResetStrategy.NONE);
    consumer.updateEndOffsets(Map.of(P0, 100L));
    assertEquals("timeout 0", RecordDigests.firstAndNth(consumer, "t:0", "0", "1", 300));
  }

  @Test
  void theDigestCoversTimestampKeyValueAndHeaders() {
    String base = RecordDigests.digest(record(P0, 1, "v", 1L));
    assertEquals(base, RecordDigests.digest(record(P1, 9, "v", 1L)));  // not the offset
    assertNotEquals(base, RecordDigests.digest(record(P0, 1, "v", 2L)));
    assertNotEquals(base, RecordDigests.digest(record(P0, 1, "w", 1L)));
    assertNotEquals(base, RecordDigests.digest(record(P0, 1, null, 1L)));
    ConsumerRecord<byte[], byte[]> more = record(P0, 1, "v", 1L);
    more.headers().add("x", null);
    assertNotEquals(base, RecordDigests.digest(more));
  }

  @Test
  void aPartitionAskedTwiceOrACountBelowOneIsRefused() {
    MockConsumer<byte[], byte[]> consumer = new MockConsumer<>(OffsetResetStrategy.NONE);
    assertThrows(IllegalArgumentException.class,
        () -> RecordDigests.firstAndNth(consumer, "t:0,t:0", "0,1", "1,1", 1_000));
    assertThrows(IllegalArgumentException.class,
        () -> RecordDigests.firstAndNth(consumer, "t:0", "0", "0", 1_000));
  }
}
