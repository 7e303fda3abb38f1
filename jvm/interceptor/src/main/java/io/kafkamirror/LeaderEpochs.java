package io.kafkamirror;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.NoOffsetForPartitionException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Source partitions' leader epochs, and where a partition's log diverged from what a reader saw
 * (KIP-320), for the Python side's check for unclean leader elections (py4j, one call per
 * question whatever the number of partitions).
 */
public final class LeaderEpochs {

  private LeaderEpochs() {}

  /**
   * The end offset and the leader epoch of {@code partitions} ({@link PartitionList}), as
   * {@code end:epoch} comma-separated in the same order (epoch -1 when the broker gave none).
   */
  public static String latest(Admin admin, String partitions, long timeoutMs)
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
      ListOffsetsResult.ListOffsetsResultInfo info = result.get(order[i]);
      if (i > 0) {
        out.append(',');
      }
      out.append(info.offset()).append(':').append(info.leaderEpoch().orElse(-1));
    }
    return out.toString();
  }

  /**
   * Per partition, the first offset at which the current leader's log differs from a log in
   * which the partition's position was reached under the partition's leader epoch (the end
   * offset of that epoch on the current leader, when it is below the position: a truncation),
   * or -1 when the current log holds everything below the position, or -2 when the leader knows
   * no epoch at or below the one given (a log that started over). Partitions, positions and
   * epochs come as {@link PartitionList} strings, in the partitions' order.
   * Asked the way a Kafka consumer validates its position (OffsetsForLeaderEpoch), with
   * {@code consumerProps}' connection settings; the answer comma-separated in the same order.
   */
  public static String divergence(
      Properties consumerProps,
      String partitions,
      String positionList,
      String epochList,
      long timeoutMs) {
    TopicPartition[] order = PartitionList.parse(partitions);
    long[] positions = PartitionList.numbers(positionList, order.length);
    long[] epochs = PartitionList.numbers(epochList, order.length);
    Properties props = new Properties();
    props.putAll(consumerProps);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(
        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
    props.remove(ConsumerConfig.GROUP_ID_CONFIG);
    long[] diverged = new long[order.length];
    Map<TopicPartition, Integer> index = new HashMap<>();
    for (int i = 0; i < order.length; i++) {
      diverged[i] = -1;
      index.put(order[i], i);
    }
    long deadline = System.currentTimeMillis() + timeoutMs;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.assign(List.of(order));
      // the leaders' epochs in the consumer's metadata first: a position sought while they are
      // unknown is taken as valid without asking the leader
      consumer.endOffsets(List.of(order), Duration.ofMillis(timeoutMs));
      for (int i = 0; i < order.length; i++) {
        consumer.seek(
            order[i],
            new OffsetAndMetadata(positions[i], Optional.of((int) epochs[i]), ""));
      }
      List<TopicPartition> open = new ArrayList<>(List.of(order));
      while (!open.isEmpty()) {
        TopicPartition tp = open.get(0);
        long left = Math.max(1, deadline - System.currentTimeMillis());
        try {
          consumer.position(tp, Duration.ofMillis(left));
          open.remove(0);
        } catch (LogTruncationException truncated) {
          for (Map.Entry<TopicPartition, OffsetAndMetadata> entry :
              truncated.divergentOffsets().entrySet()) {
            Integer at = index.get(entry.getKey());
            if (at != null) {
              diverged[at] = entry.getValue().offset();
              open.remove(entry.getKey());
            }
          }
        } catch (NoOffsetForPartitionException unknown) {
          for (TopicPartition gone : unknown.partitions()) {
            Integer at = index.get(gone);
            if (at != null) {
              diverged[at] = -2;
              open.remove(gone);
            }
          }
        }
      }
    }
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < order.length; i++) {
      if (i > 0) {
        out.append(',');
      }
      out.append(diverged[i]);
    }
    return out.toString();
  }
}
