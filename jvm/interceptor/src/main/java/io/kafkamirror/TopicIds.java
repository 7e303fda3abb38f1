package io.kafkamirror;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The IDs of several topics in one call, for the Python side's topic refresh (py4j): librdkafka's
 * Python client builds an object for every partition, replica and in-sync replica of every topic
 * it describes, most of an idle mirror's control-plane CPU at thousands of partitions.
 */
public final class TopicIds {

  private TopicIds() {}

  /**
   * {@code topic=id} of each of {@code topics} (comma-separated) that exists, comma-separated; a
   * topic deleted meanwhile is left out. The IDs are written as librdkafka writes them (base64
   * with '+' and '/', no padding), which the mirror's state holds; null when the cluster gives
   * topics no IDs (brokers before Kafka 2.8).
   *
   * @throws ExecutionException when the request failed (the cause says why)
   * @throws TimeoutException when the cluster did not answer within {@code timeoutMs}
   */
  public static String read(Admin admin, String topics, long timeoutMs)
      throws ExecutionException, InterruptedException, TimeoutException {
    if (topics.isEmpty()) {
      return "";
    }
    List<String> names = Arrays.asList(topics.split(",", -1));
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    Map<String, KafkaFuture<TopicDescription>> described =
        admin.describeTopics(TopicCollection.ofTopicNames(names)).topicNameValues();
    StringBuilder out = new StringBuilder();
    for (String name : names) {
      TopicDescription description;
      try {
        description = described.get(name).get(
            Math.max(0L, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        if (e.getCause() instanceof UnknownTopicOrPartitionException) {
          continue;
        }
        throw e;
      }
      if (Uuid.ZERO_UUID.equals(description.topicId())) {
        return null;
      }
      if (out.length() > 0) {
        out.append(',');
      }
      out.append(name).append('=').append(text(description.topicId()));
    }
    return out.toString();
  }

  /** {@code id} as librdkafka's {@code rd_kafka_Uuid_base64str} writes it. */
  static String text(Uuid id) {
    ByteBuffer bytes = ByteBuffer.allocate(16);
    bytes.putLong(id.getMostSignificantBits()).putLong(id.getLeastSignificantBits());
    return Base64.getEncoder().withoutPadding().encodeToString(bytes.array());
  }
}
