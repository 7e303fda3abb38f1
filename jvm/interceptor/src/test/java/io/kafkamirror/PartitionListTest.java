package io.kafkamirror;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

class PartitionListTest {

  @Test
  void partitionsInOrder() {
    TopicPartition[] parsed = PartitionList.parse("a:0,b.c-d_e:17,a:1");
    assertArrayEquals(new TopicPartition[] {new TopicPartition("a", 0),
        new TopicPartition("b.c-d_e", 17), new TopicPartition("a", 1)}, parsed);
    assertEquals(0, PartitionList.parse("").length);
  }

  @Test
  void numbersOfTheRightCount() {
    assertArrayEquals(new long[] {1, 9_000_000_000L}, PartitionList.numbers("1,9000000000", 2));
    assertEquals(0, PartitionList.numbers("", 0).length);
    assertThrows(IllegalArgumentException.class, () -> PartitionList.numbers("1", 2));
  }

  @Test
  void badItemsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> PartitionList.parse("a"));
    assertThrows(IllegalArgumentException.class, () -> PartitionList.parse("a:0,"));
    assertThrows(NumberFormatException.class, () -> PartitionList.parse("a:x"));
  }
}
