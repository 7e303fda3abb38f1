package io.kafkamirror;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.TopicPartition;

/**
 * High watermarks of several partitions in one call, for the Python side's batch writer (py4j):
 * one round trip between Python and the JVM instead of one per object, on the hot path of every
 * micro-batch.
 */
public final class EndOffsets {

  private EndOffsets() {}

  /**
   * The end offsets of {@code partitions} ({@link PartitionList}), comma-separated in the same
   * order.
   *
   * @throws ExecutionException when the request failed (the cause says why)
   * @throws TimeoutException when the cluster did not answer within {@code timeoutMs}
   */
  public static String read(Admin admin, String partitions, long timeoutMs)
      throws ExecutionException, InterruptedException, TimeoutException {
    TopicPartition[] order = PartitionList.parse(partitions);
    Map<TopicPartition, OffsetSpec> request = new HashMap<>();
    for (TopicPartition tp : order) {
      request.put(tp, OffsetSpec.latest());
    }
    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> result =
        admin.listOffsets(request).all().get(timeoutMs, TimeUnit.MILLISECONDS);
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < order.length; i++) {
      if (i > 0) {
        out.append(',');
      }
      out.append(result.get(order[i]).offset());
    }
    return out.toString();
  }
}
