package io.kafkamirror;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;

/**
 * The first record at or after a start offset and the n-th one, of many partitions in one pass
 * through one consumer, for the exactly-once restart's proof (the Python side, py4j): the
 * partitions are fetched together (one fetch per broker for all of them), not one after the
 * other, and only a digest of each record crosses to Python.
 *
 * <p>A digest is SHA-256 over what the proof compares of a record: its timestamp, key, value and
 * headers (each length-prefixed, -1 for null), in hex.
 */
public final class RecordDigests {

  private static final Duration POLL = Duration.ofMillis(200);

  private RecordDigests() {}

  /**
   * Per partition of {@code partitions}, from its offset in {@code starts}, the first record and
   * the one numbered in {@code counts} ({@link PartitionList} strings, in the same order). One
   * line per partition, in that order: {@code ok <first offset> <first digest>
   * <n-th offset> <n-th digest>}; {@code short <records seen> <end offset>} when the partition
   * holds fewer than n records from the start to its end (read when the pass began);
   * {@code timeout <records seen>} when the pass made no progress for {@code idleTimeoutMs}.
   * The consumer is left assigned to nothing.
   *
   * @throws IllegalArgumentException for lists of different lengths, a partition asked twice or
   *     a count below 1
   */
  public static String firstAndNth(
      Consumer<byte[], byte[]> consumer,
      String partitions,
      String starts,
      String counts,
      long idleTimeoutMs) {
    TopicPartition[] order = PartitionList.parse(partitions);
    int size = order.length;
    long[] from = PartitionList.numbers(starts, size);
    long[] wanted = PartitionList.numbers(counts, size);
    Map<TopicPartition, Integer> index = new HashMap<>();
    for (int i = 0; i < size; i++) {
      if (index.put(order[i], i) != null) {
        throw new IllegalArgumentException(order[i] + " asked twice");
      }
      if (wanted[i] < 1) {
        throw new IllegalArgumentException(order[i] + ": count " + wanted[i] + " below 1");
      }
    }
    String[] lines = new String[size];
    if (size == 0) {
      return "";
    }
    List<TopicPartition> all = List.of(order);
    consumer.assign(all);
    try {
      for (int i = 0; i < size; i++) {
        consumer.seek(order[i], from[i]);
      }
      Map<TopicPartition, Long> ends = consumer.endOffsets(all, Duration.ofMillis(idleTimeoutMs));
      long[] seen = new long[size];
      String[] first = new String[size];
      Set<TopicPartition> open = new HashSet<>(all);
      List<TopicPartition> done = new ArrayList<>();
      long idleSince = System.nanoTime();
      while (!open.isEmpty()) {
        for (TopicPartition tp : open) {
          int i = index.get(tp);
          if (consumer.position(tp) >= ends.get(tp) && lines[i] == null) {
            lines[i] = "short " + seen[i] + " " + ends.get(tp);
            done.add(tp);
          }
        }
        close(consumer, open, done);
        if (open.isEmpty()) {
          break;
        }
        if (System.nanoTime() - idleSince > idleTimeoutMs * 1_000_000L) {
          for (TopicPartition tp : open) {
            int i = index.get(tp);
            lines[i] = "timeout " + seen[i];
          }
          break;
        }
        ConsumerRecords<byte[], byte[]> records = consumer.poll(POLL);
        for (TopicPartition tp : records.partitions()) {
          if (!open.contains(tp)) {
            continue;
          }
          int i = index.get(tp);
          long n = wanted[i];
          for (ConsumerRecord<byte[], byte[]> record : records.records(tp)) {
            idleSince = System.nanoTime();
            seen[i]++;
            if (seen[i] == 1) {
              first[i] = record.offset() + " " + digest(record);
            }
            if (seen[i] == n) {
              lines[i] = "ok " + first[i] + " " + record.offset() + " " + digest(record);
              done.add(tp);
              break;
            }
          }
        }
        close(consumer, open, done);
      }
    } finally {
      consumer.assign(List.of());
    }
    return String.join("\n", lines);
  }

  private static void close(
      Consumer<byte[], byte[]> consumer, Set<TopicPartition> open, List<TopicPartition> done) {
    if (!done.isEmpty()) {
      consumer.pause(done);
      done.forEach(open::remove);
      done.clear();
    }
  }

  /** SHA-256 of the record's timestamp, key, value and headers, in hex. */
  public static String digest(ConsumerRecord<byte[], byte[]> record) {
    MessageDigest sha;
    try {
      sha = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 missing from this JVM", e);
    }
    sha.update(ByteBuffer.allocate(Long.BYTES).putLong(record.timestamp()).array());
    field(sha, record.key());
    field(sha, record.value());
    Header[] headers = record.headers().toArray();
    sha.update(ByteBuffer.allocate(Integer.BYTES).putInt(headers.length).array());
    for (Header header : headers) {
      field(sha, header.key().getBytes(StandardCharsets.UTF_8));
      field(sha, header.value());
    }
    StringBuilder hex = new StringBuilder(64);
    for (byte b : sha.digest()) {
      hex.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
    }
    return hex.toString();
  }

  private static void field(MessageDigest sha, byte[] bytes) {
    sha.update(ByteBuffer.allocate(Integer.BYTES).putInt(bytes == null ? -1 : bytes.length).array());
    if (bytes != null) {
      sha.update(bytes);
    }
  }
}
