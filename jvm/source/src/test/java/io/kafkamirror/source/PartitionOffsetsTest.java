package io.kafkamirror.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

class PartitionOffsetsTest {
  @Test
  void writesSparksKafkaSourceFormatSorted() {
    PartitionOffsets offsets = new PartitionOffsets(Map.of(
        new TopicPartition("orders", 10), 5L,
        new TopicPartition("orders", 2), 7L,
        new TopicPartition("audit", 0), -2L));
    assertEquals("{\"audit\":{\"0\":-2},\"orders\":{\"2\":7,\"10\":5}}", offsets.json());
    assertEquals(offsets, PartitionOffsets.parse(offsets.json()));
  }

  @Test
  void readsWhatSparksKafkaSourceWrote() {
    PartitionOffsets offsets = PartitionOffsets.parse("{\"t\":{\"1\":40,\"0\":12}}");
    assertEquals(Map.of(new TopicPartition("t", 0), 12L, new TopicPartition("t", 1), 40L),
        offsets.offsets());
  }

  @Test
  void badTextIsNamed() {
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> PartitionOffsets.parse("[1,2]"));
    assertEquals(true, error.getMessage().contains("[1,2]"));
  }

  @Test
  void assignmentIsReadInPartitionOrder() {
    assertEquals(
        List.of(new TopicPartition("a", 0), new TopicPartition("b", 1), new TopicPartition("b", 3)),
        SourceOptions.assignment("{\"b\":[3,1],\"a\":[0]}"));
    assertThrows(IllegalArgumentException.class, () -> SourceOptions.assignment("{\"b\":3}"));
  }
}
