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
      return restore(record, run);
    } catch (RuntimeException e) {
      // An interceptor must never break the producer; fall back to the record as given.
      return record;
    }
  }

  /**
   * The record without the trailing marker headers (the offset marker, then the timestamp
   * marker before it), in one pass; its timestamp from the timestamp marker. With {@code copies}
   * (a query run) the source offset is handed to {@link CopiedRanges}.
   */
  static ProducerRecord<byte[], byte[]> restore(ProducerRecord<byte[], byte[]> record,
      String copies) {
    if (record == null || record.headers() == null) {
      return record;
    }
    Header[] all = record.headers().toArray();
    int end = all.length;
    Long offset = null;
    if (end > 0 && isMarker(all[end - 1], OFFSET_HEADER)) {
      offset = parseTimestamp(all[end - 1].value());
      end--;
    }
    boolean timestamped = end > 0 && isMarker(all[end - 1], TIMESTAMP_HEADER);
    if (!timestamped && end == all.length) {
      return record;
    }
    Long timestamp = timestamped ? parseTimestamp(all[end - 1].value()) : record.timestamp();
    if (timestamped) {
      end--;
    }
    RecordHeaders kept = new RecordHeaders();
    for (int i = 0; i < end; i++) {
      kept.add(all[i]);
    }
    if (copies != null && offset != null && record.partition() != null) {
      CopiedRanges.tracker(copies, record.topic(), record.partition()).sent(offset);
    }
    return new ProducerRecord<>(
        record.topic(), record.partition(), timestamp, record.key(), record.value(), kept);
  }

  private static boolean isMarker(Header header, String key) {
    return header != null && key.equals(header.key());
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
    String copies = run;
    if (copies != null && metadata != null && metadata.partition() >= 0) {
      try {
        CopiedRanges.tracker(copies, metadata.topic(), metadata.partition()).acknowledged(
            exception == null && metadata.hasOffset() ? metadata.offset() : -1L,
            exception != null);
      } catch (RuntimeException e) {
        // offset translation must never disturb the producer
      }
    }
    LatencyRegistry.FlowRecorder recorder = latency;
    if (recorder == null || exception != null || metadata == null) {
      return;
    }
    try {
      long timestamp = metadata.timestamp();
      if (timestamp >= 0) {
        recorder.record(metadata.topic(), System.currentTimeMillis() - timestamp);
      }
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
