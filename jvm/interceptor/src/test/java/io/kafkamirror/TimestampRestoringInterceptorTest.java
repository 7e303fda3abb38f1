package io.kafkamirror;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.nio.charset.StandardCharsets;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

class TimestampRestoringInterceptorTest {

  private static final String MARKER = TimestampRestoringInterceptor.TIMESTAMP_HEADER;

  private final TimestampRestoringInterceptor interceptor = new TimestampRestoringInterceptor();

  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void markerRemovedAndTimestampSet() {
    RecordHeaders headers = new RecordHeaders();
    headers.add("a", b("1"));
    headers.add("b", b("2"));
    headers.add(MARKER, b("1700000000123"));
    ProducerRecord<byte[], byte[]> in =
        new ProducerRecord<>("t", 2, null, b("k"), b("v"), headers);

    ProducerRecord<byte[], byte[]> out = interceptor.onSend(in);

    assertEquals("t", out.topic());
    assertEquals(2, out.partition());
    assertEquals(1700000000123L, out.timestamp());
    assertArrayEquals(b("k"), out.key());
    assertArrayEquals(b("v"), out.value());
    Header[] h = out.headers().toArray();
    assertEquals(2, h.length);
    assertEquals("a", h[0].key());
    assertArrayEquals(b("1"), h[0].value());
    assertEquals("b", h[1].key());
    assertArrayEquals(b("2"), h[1].value());
  }

  @Test
  void noMarkerLeavesRecordUnchanged() {
    RecordHeaders headers = new RecordHeaders();
    headers.add("a", b("1"));
    ProducerRecord<byte[], byte[]> in =
        new ProducerRecord<>("t", null, 42L, b("k"), b("v"), headers);
    assertSame(in, interceptor.onSend(in));

    ProducerRecord<byte[], byte[]> bare = new ProducerRecord<>("t", b("v"));
    assertSame(bare, interceptor.onSend(bare));
  }

  @Test
  void markerNotLastLeavesRecordUnchanged() {
    RecordHeaders headers = new RecordHeaders();
    headers.add(MARKER, b("1700000000123"));
    headers.add("a", b("1"));
    ProducerRecord<byte[], byte[]> in =
        new ProducerRecord<>("t", null, null, b("k"), b("v"), headers);
    assertSame(in, interceptor.onSend(in));
  }

  @Test
  void earlierSameKeyHeaderIsKept() {
    RecordHeaders headers = new RecordHeaders();
    headers.add(MARKER, b("user-value"));
    headers.add("x", null);
    headers.add(MARKER, b("5"));
    ProducerRecord<byte[], byte[]> in =
        new ProducerRecord<>("t", 0, null, b("k"), b("v"), headers);

    ProducerRecord<byte[], byte[]> out = interceptor.onSend(in);

    assertEquals(5L, out.timestamp());
    Header[] h = out.headers().toArray();
    assertEquals(2, h.length);
    assertEquals(MARKER, h[0].key());
    assertArrayEquals(b("user-value"), h[0].value());
    assertEquals("x", h[1].key());
    assertNull(h[1].value());
  }

  @Test
  void badValueGivesNullTimestamp() {
    for (byte[] bad :
        new byte[][] {
          b("-1"), b("abc"), b(""), null, b("12 3"), b("99999999999999999999"), b("+5"), b("1.5")
        }) {
      RecordHeaders headers = new RecordHeaders();
      headers.add("a", b("1"));
      headers.add(MARKER, bad);
      ProducerRecord<byte[], byte[]> in =
          new ProducerRecord<>("t", 1, 77L, b("k"), b("v"), headers);

      ProducerRecord<byte[], byte[]> out = interceptor.onSend(in);

      assertNull(out.timestamp());
      assertEquals(1, out.partition());
      Header[] h = out.headers().toArray();
      assertEquals(1, h.length);
      assertEquals("a", h[0].key());
    }
  }

  @Test
  void tombstoneNullKeyAndValuePreserved() {
    RecordHeaders headers = new RecordHeaders();
    headers.add(MARKER, b("0"));
    ProducerRecord<byte[], byte[]> in = new ProducerRecord<>("t", null, null, null, null, headers);

    ProducerRecord<byte[], byte[]> out = interceptor.onSend(in);

    assertEquals("t", out.topic());
    assertNull(out.partition());
    assertNull(out.key());
    assertNull(out.value());
    assertEquals(0L, out.timestamp());
    assertEquals(0, out.headers().toArray().length);
  }

  @Test
  void lifecycleMethodsAreNoOps() {
    interceptor.configure(java.util.Map.of());
    interceptor.onAcknowledgement(null, null);
    interceptor.close();
  }
}
