package io.kafkamirror;

import java.nio.charset.StandardCharsets;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Restores source record timestamps on records written by Spark's Kafka sink.
 *
 * <p>Spark's Kafka sink cannot set a record timestamp, so the kafka.mirror Spark job appends one
 * extra header, {@value #TIMESTAMP_HEADER}, as the <em>last</em> header of each record. Its value
 * is the source timestamp in epoch milliseconds as ASCII decimal. This interceptor strips that
 * last header and sets the record timestamp from it. Earlier headers, even ones with the same key,
 * are kept untouched and in order. The interceptor never throws.
 *
 * <p>With {@value #LATENCY_FLOW_CONFIG} set (the flow's name; kafka.mirror sets it when metrics
 * are on), each record the target acknowledged adds its replication latency (now minus its
 * timestamp, the restored source timestamp) to {@link LatencyRegistry}, per flow and destination
 * topic. Unset, acknowledgements cost nothing.
 *
 * <p>In real-time mode the job puts one more header after it, {@value #OFFSET_HEADER}: the
 * record's source offset (ASCII decimal). It is stripped too, and with {@value
 * CopiedRanges#RUN_CONFIG} set, each record's source offset and its offset on the target go to
 * {@link CopiedRanges} (offset translation without micro-batch boundaries).
 */
public final class TimestampRestoringInterceptor implements ProducerInterceptor<byte[], byte[]> {

  /** Key of the marker header carrying the source timestamp. */
  public static final String TIMESTAMP_HEADER = "kafka-mirror.timestamp";

  /** Producer config key naming the flow whose latency to record (absent: not recorded). */
  public static final String LATENCY_FLOW_CONFIG = "kafka-mirror.latency.flow";

  /** Key of the marker header carrying the source offset (real-time mode), after the other. */
  public static final String OFFSET_HEADER = "kafka-mirror.offset";

  private volatile LatencyRegistry.FlowRecorder latency;
  private volatile String run;

  @Override
  public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
    try {
      Long offset = record == null ? null : lastHeaderNumber(record, OFFSET_HEADER);
      if (offset == null) {
        return restore(record);
      }
      ProducerRecord<byte[], byte[]> restored = restore(withoutLastHeader(record));
      String copies = run;
      if (copies != null && restored.partition() != null) {
        CopiedRanges.tracker(copies, restored.topic(), restored.partition()).sent(offset);
      }
      return restored;
    } catch (RuntimeException e) {
      // An interceptor must never break the producer; fall back to the record as given.
      return record;
    }
  }

  static ProducerRecord<byte[], byte[]> restore(ProducerRecord<byte[], byte[]> record) {
    if (record == null) {
      return null;
    }
    Headers headers = record.headers();
    if (headers == null) {
      return record;
    }
    Header[] all = headers.toArray();
    if (all.length == 0) {
      return record;
    }
    Header last = all[all.length - 1];
    if (last == null || !TIMESTAMP_HEADER.equals(last.key())) {
      return record;
    }
    RecordHeaders kept = new RecordHeaders();
    for (int i = 0; i < all.length - 1; i++) {
      kept.add(all[i]);
    }
    return new ProducerRecord<>(
        record.topic(),
        record.partition(),
        parseTimestamp(last.value()),
        record.key(),
        record.value(),
        kept);
  }

  /** The value of the record's last header when it has that key and a number; else null. */
  static Long lastHeaderNumber(ProducerRecord<byte[], byte[]> record, String key) {
    Headers headers = record.headers();
    if (headers == null) {
      return null;
    }
    Header last = null;
    for (Header header : headers) {
      last = header;
    }
    return last != null && key.equals(last.key()) ? parseTimestamp(last.value()) : null;
  }

  static ProducerRecord<byte[], byte[]> withoutLastHeader(ProducerRecord<byte[], byte[]> record) {
    Header[] all = record.headers().toArray();
    RecordHeaders kept = new RecordHeaders();
    for (int i = 0; i < all.length - 1; i++) {
      kept.add(all[i]);
    }
    return new ProducerRecord<>(record.topic(), record.partition(), record.timestamp(),
        record.key(), record.value(), kept);
  }

  /** Parses a non-negative ASCII decimal epoch-millis value; {@code null} if absent or invalid. */
  static Long parseTimestamp(byte[] value) {
    if (value == null || value.length == 0 || value.length > 19) {
      return null;
    }
    for (byte b : value) {
      if (b < '0' || b > '9') {
        return null;
      }
    }
    try {
      long ts = Long.parseLong(new String(value, StandardCharsets.US_ASCII));
      return ts >= 0 ? ts : null;
    } catch (NumberFormatException e) {
      return null;
    }
  }

  @Override
  public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
    long age = -1L;
    if (metadata != null && exception == null && metadata.timestamp() >= 0) {
      age = Math.max(0L, System.currentTimeMillis() - metadata.timestamp());
    }
    String copies = run;
    if (copies != null && metadata != null && metadata.partition() >= 0) {
      try {
        CopiedRanges.tracker(copies, metadata.topic(), metadata.partition()).acknowledged(
            exception == null && metadata.hasOffset() ? metadata.offset() : -1L,
            exception,
            (long) Math.max(0, metadata.serializedKeySize())
                + Math.max(0, metadata.serializedValueSize()),
            age);
      } catch (RuntimeException e) {
        // offset translation must never disturb the producer
      }
    }
    LatencyRegistry.FlowRecorder recorder = latency;
    if (recorder == null || age < 0) {
      return;
    }
    try {
      recorder.record(metadata.topic(), age);
    } catch (RuntimeException e) {
      // metrics must never disturb the producer
    }
  }

  @Override
  public void close() {
    // no-op
  }

  @Override
  public void configure(Map<String, ?> configs) {
    try {
      Object flow = configs == null ? null : configs.get(LATENCY_FLOW_CONFIG);
      String name = flow == null ? "" : flow.toString().trim();
      latency = name.isEmpty() ? null : new LatencyRegistry.FlowRecorder(name);
    } catch (RuntimeException e) {
      latency = null;
    }
    Object copies = configs == null ? null : configs.get(CopiedRanges.RUN_CONFIG);
    String key = copies == null ? "" : copies.toString().trim();
    run = key.isEmpty() ? null : key;
  }
}
