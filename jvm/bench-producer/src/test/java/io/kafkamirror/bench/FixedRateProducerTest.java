package io.kafkamirror.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class FixedRateProducerTest {

  private static final Node BROKER = new Node(1, "localhost", 9092);

  private final AtomicLong clock = new AtomicLong(1_000_000_000L);
  private final AtomicLong epoch = new AtomicLong(1_700_000_000_000_000_000L);

  private MockProducer<byte[], byte[]> mock(String topic, int partitions) {
    PartitionInfo[] infos = new PartitionInfo[partitions];
    for (int p = 0; p < partitions; p++) {
      infos[p] = new PartitionInfo(topic, p, BROKER, new Node[] {BROKER}, new Node[] {BROKER});
    }
    Cluster cluster = new Cluster("c", List.of(BROKER), List.of(infos), Set.of(), Set.of());
    return new MockProducer<>(cluster, true, null, new ByteArraySerializer(),
        new ByteArraySerializer());
  }

  private FixedRateProducer producer(MockProducer<byte[], byte[]> mock, int recordSize) {
    byte[] filler = "abcdefghij".repeat(20).getBytes(StandardCharsets.US_ASCII);
    return new FixedRateProducer(mock, filler, recordSize, clock::get, epoch::get);
  }

  private static String answer(FixedRateProducer producer, String command) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    producer.handle(command, out);
    return bytes.toString(StandardCharsets.UTF_8);
  }

  @Test
  void stampIsPhaseAndNanosFixedWidth() {
    assertEquals("007|0000000000000000042|", FixedRateProducer.stamp(7, 42));
    assertEquals(FixedRateProducer.STAMP_LEN, FixedRateProducer.stamp(100, Long.MAX_VALUE).length());
  }

  @Test
  void sendsWhatIsDueRoundRobinInOrder() {
    MockProducer<byte[], byte[]> mock = mock("t", 3);
    FixedRateProducer producer = producer(mock, 64);
    producer.handle("stream s t 2 100 0,1,2", System.out);
    assertEquals(0, producer.tick());
    clock.addAndGet(50_000_000L); // 50 ms at 100/s: 5 records
    assertEquals(5, producer.tick());
    assertEquals(0, producer.tick());
    clock.addAndGet(20_000_000L);
    assertEquals(2, producer.tick());
    List<ProducerRecord<byte[], byte[]>> sent = mock.history();
    assertEquals(7, sent.size());
    for (int i = 0; i < sent.size(); i++) {
      assertEquals(i % 3, sent.get(i).partition());
      assertEquals(String.format("key-%010d", i),
          new String(sent.get(i).key(), StandardCharsets.US_ASCII));
      byte[] value = sent.get(i).value();
      assertEquals(64, value.length);
      assertTrue(new String(value, StandardCharsets.US_ASCII).startsWith("002|"));
    }
  }

  @Test
  void countsWhatTheBrokerAcknowledgedPerPartition() {
    MockProducer<byte[], byte[]> mock = mock("t", 2);
    FixedRateProducer producer = producer(mock, 30);
    producer.handle("stream s t 1 10 0,1", System.out);
    clock.addAndGet(500_000_000L);
    assertEquals(5, producer.tick());
    String text = answer(producer, "counts");
    assertTrue(text.contains("count 1 t 0 3\n"), text);
    assertTrue(text.contains("count 1 t 1 2\n"), text);
    assertTrue(text.contains("first s " + epoch.get() + "\n"), text);
    assertTrue(text.contains("failed 0\n"), text);
    assertTrue(text.contains("acked_ms 0.000 0.000 0.000\nsent 5 "), text);
    assertTrue(text.endsWith("end\n"), text);
  }

  @Test
  void stoppedStreamsSendNothingAndExitAnswersThenEnds() {
    MockProducer<byte[], byte[]> mock = mock("t", 1);
    FixedRateProducer producer = producer(mock, 30);
    producer.handle("stream s t 1 10 0", System.out);
    producer.handle("stop s", System.out);
    clock.addAndGet(1_000_000_000L);
    assertEquals(0, producer.tick());
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    assertFalse(producer.handle("exit", new PrintStream(bytes, true, StandardCharsets.UTF_8)));
    assertTrue(bytes.toString(StandardCharsets.UTF_8).contains("failed 0\nacked_ms - - -\nsent 0 "));
  }

  @Test
  void refusesUnknownCommands() {
    FixedRateProducer producer = producer(mock("t", 1), 30);
    assertThrows(IllegalArgumentException.class, () -> producer.handle("go", System.out));
    assertThrows(IllegalArgumentException.class, () -> producer.handle("stream s t", System.out));
  }
}
