package io.kafkamirror.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

class LimitsTest {
  private static final TopicPartition A = new TopicPartition("orders", 0);
  private static final TopicPartition B = new TopicPartition("orders", 1);
  private static final TopicPartition C = new TopicPartition("audit", 0);

  private static Map<TopicPartition, Long> offsets(long a, long b, long c) {
    Map<TopicPartition, Long> map = new LinkedHashMap<>();
    map.put(A, a);
    map.put(B, b);
    map.put(C, c);
    return map;
  }

  @Test
  void allWaitingRecordsFitUnderTheLimit() {
    Map<TopicPartition, Long> ends = offsets(10, 20, 30);
    assertSame(ends, Limits.limited(offsets(5, 20, 0), ends, 35));
  }

  @Test
  void theLimitIsSharedByBacklog() {
    // backlogs 100, 0, 300: 40 records -> 10 and 30
    assertEquals(offsets(10, 7, 30), Limits.limited(offsets(0, 7, 0), offsets(100, 7, 300), 40));
  }

  @Test
  void roundingNeverLeavesABatchEmpty() {
    // backlogs 1, 1, 1 and a limit of 2: floor(2/3) = 0 each, the remainder goes in order
    assertEquals(offsets(1, 1, 0), Limits.limited(offsets(0, 0, 0), offsets(1, 1, 1), 2));
  }

  @Test
  void aLogThatEndsBeforeTheStartIsLeftForPlanningToReport() {
    // partition C's log now ends at 3, below the stream's position 9 (truncated)
    Map<TopicPartition, Long> limited = Limits.limited(offsets(0, 0, 9), offsets(50, 50, 3), 10);
    assertEquals(3L, limited.get(C));
    assertEquals(10L, limited.get(A) + limited.get(B));
  }
}
