package io.kafkamirror;

import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * Every topic of a cluster with its partition count in one call, for the Python side's topic
 * refresh (py4j): librdkafka's Python client builds an object for every partition, replica and
 * in-sync replica of the cluster's metadata, the largest share of an idle mirror's control-plane
 * CPU at thousands of partitions. MirrorMaker 2's refresh asks the same two requests.
 */
public final class PartitionCounts {

  private PartitionCounts() {}

  /**
   * {@code topic=partitions} of every topic of the cluster (internal topics included),
   * comma-separated, in name order; a topic deleted between the two requests is left out.
   *
   * @throws ExecutionException when a request failed (the cause says why)
   * @throws TimeoutException when the cluster did not answer within {@code timeoutMs}
   */
  public static String read(Admin admin, long timeoutMs)
      throws ExecutionException, InterruptedException, TimeoutException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    Set<String> names = new TreeSet<>(admin.listTopics(new ListTopicsOptions().listInternal(true))
        .names().get(timeoutMs, TimeUnit.MILLISECONDS));
    if (names.isEmpty()) {
      return "";
    }
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
      if (out.length() > 0) {
        out.append(',');
      }
      out.append(name).append('=').append(description.partitions().size());
    }
    return out.toString();
  }
}
