package io.kafkamirror.source;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The source's options, named as Spark's Kafka source names them ({@code kafka.*}, {@code
 * assign}, {@code startingOffsets}, {@code failOnDataLoss}, {@code maxOffsetsPerTrigger},
 * {@code kafkaConsumer.pollTimeoutMs}) plus {@code groups}: how many groups (tasks, consumers)
 * the assigned partitions are spread over, and {@code writeGate}: the name of the flow's {@link
 * WriteGate} in this JVM (none when not given), and {@code run}: the query run whose readers
 * {@link OpenReaders} counts (none when not given). As in Spark's Kafka source, {@code
 * kafkaConsumer.pollTimeoutMs} defaults to {@code spark.network.timeout}.
 */
public record SourceOptions(
    List<TopicPartition> partitions,
    String startingOffsets,
    Map<String, String> kafkaParams,
    boolean failOnDataLoss,
    long maxOffsetsPerTrigger,
    int groups,
    long pollTimeoutMs,
    String writeGate,
    String run) {

  static final String KAFKA_PREFIX = "kafka.";
  private static final ObjectMapper JSON = new ObjectMapper();

  public static SourceOptions from(CaseInsensitiveStringMap options) {
    String assign = required(options, "assign");
    List<TopicPartition> partitions = assignment(assign);
    if (partitions.isEmpty()) {
      throw new IllegalArgumentException("option assign names no partition: " + assign);
    }
    HashMap<String, String> kafka = new HashMap<>();
    options.asCaseSensitiveMap().forEach((key, value) -> {
      if (key.toLowerCase(Locale.ROOT).startsWith(KAFKA_PREFIX)) {
        kafka.put(key.substring(KAFKA_PREFIX.length()), value);
      }
    });
    if (!kafka.containsKey("bootstrap.servers")) {
      throw new IllegalArgumentException("option kafka.bootstrap.servers is required");
    }
    kafka.put("key.deserializer", ByteArrayDeserializer.class.getName());
    kafka.put("value.deserializer", ByteArrayDeserializer.class.getName());
    kafka.put("enable.auto.commit", "false");
    kafka.put("auto.offset.reset", "none");
    kafka.remove("group.id");
    return new SourceOptions(
        partitions,
        options.getOrDefault("startingOffsets", "latest"),
        kafka,
        options.getBoolean("failOnDataLoss", true),
        options.getLong("maxOffsetsPerTrigger", Long.MAX_VALUE),
        Math.max(1, options.getInt("groups", 1)),
        options.getLong("kafkaConsumer.pollTimeoutMs", networkTimeoutMs()),
        options.get("writeGate"),
        options.get("run"));
  }

  /** {@code spark.network.timeout} (120 s unless set), in milliseconds. */
  static long networkTimeoutMs() {
    SparkEnv env = SparkEnv.get();
    return env == null
        ? 120_000L
        : env.conf().getTimeAsSeconds("spark.network.timeout", "120s") * 1000L;
  }

  /** {@code {"topic":[0,1,2]}}, as Spark's Kafka source takes it, in topic-partition order. */
  static List<TopicPartition> assignment(String assign) {
    Map<String, List<Integer>> topics;
    try {
      topics = JSON.readValue(assign, new TypeReference<Map<String, List<Integer>>>() {});
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "option assign: expected {\"topic\":[0,1]}, got " + assign, e);
    }
    List<TopicPartition> partitions = new ArrayList<>();
    topics.forEach((topic, numbers) ->
        numbers.forEach(number -> partitions.add(new TopicPartition(topic, number))));
    partitions.sort(PartitionOffsets.ORDER);
    return partitions;
  }

  private static String required(CaseInsensitiveStringMap options, String key) {
    String value = options.get(key);
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException("option " + key + " is required");
    }
    return value;
  }
}
