package io.kafkamirror.source;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One task's reader of a group of partitions through one consumer (micro-batch: each partition
 * up to its end offset; real-time: on and on). Order within a partition is the log's; partitions
 * interleave as their fetches arrive. Records fetched past a partition's end are kept with the
 * consumer for the group's next batch. While the flow's {@link WriteGate} is closed (this instance
 * does not hold the flow's lease, or its last renewal is too old) no record is handed on.
 */
final class GroupReader implements SupportsRealTimeRead<InternalRow> {
  private static final Logger LOG = LoggerFactory.getLogger(GroupReader.class);
  // The longest wait of one consumer poll while a partition has an end (micro-batch): a position
  // moved past transaction markers, with no record to return, is seen after at most this.
  private static final long POLL_MS = 500L;
  // ... and while none has (real-time: records and the batch's deadline end a wait sooner, and the
  // write gate is checked before any record is handed on; a stop interrupts the wait). Every poll
  // walks all the group's partitions, even one that returns while a fetch is in flight: an idle
  // reader of 2,000 partitions polling every 500 ms spent 1.46-1.59 CPU s a minute, every 5 s 1.31.
  private static final long OPEN_POLL_MS = 5_000L;

  private final GroupInputPartition input;
  private final ConsumerPool.Lease lease;
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final Map<TopicPartition, Long> until = new HashMap<>();
  private final Set<TopicPartition> active = new HashSet<>();
  private final ArrayDeque<ConsumerRecord<byte[], byte[]>> buffer = new ArrayDeque<>();
  private final Rows rows = new Rows();
  private final WriteGate gate;
  private InternalRow current;
  private boolean healthy = true;
  private long progressed = System.currentTimeMillis();
  private boolean closed;
  private long pollMs = POLL_MS;

  GroupReader(GroupInputPartition input) {
    this.input = input;
    this.lease = ConsumerPool.shared().borrow(input.consumerKey(), input.kafkaParams());
    this.consumer = lease.consumer;
    this.gate = WriteGate.of(input.writeGate());
    try {
      position();
    } catch (RuntimeException e) {
      ConsumerPool.shared().giveBack(lease, false);
      throw e;
    }
    OpenReaders.opened(input.run());
  }

  /** Assigns the group's partitions and puts each where its range starts, keeping what the
   * consumer holds when its last batch ended there. */
  private void position() {
    Set<TopicPartition> wanted = new HashSet<>();
    input.ranges().forEach(range -> wanted.add(range.partition()));
    if (!consumer.assignment().equals(wanted)) {
      consumer.assign(wanted);
    }
    lease.next.keySet().retainAll(wanted);
    lease.ahead.keySet().retainAll(wanted);
    for (PartitionRange range : input.ranges()) {
      TopicPartition tp = range.partition();
      long from = range.from();
      if (from == PartitionOffsets.EARLIEST) {
        consumer.seekToBeginning(List.of(tp));
        from = consumer.position(tp);
        lease.ahead.remove(tp);
      } else if (!Long.valueOf(from).equals(lease.next.get(tp))) {
        consumer.seek(tp, from);
        lease.ahead.remove(tp);
      } else {
        // going on where the group's last batch ended (what was read ahead stays valid), with
        // the position's leader epoch cleared, as a new consumer's: the flow checks the source's
        // epochs itself before each batch (an unclean election is its to judge, not a failure)
        consumer.seek(tp, consumer.position(tp));
      }
      lease.next.put(tp, from);
      until.put(tp, range.until());
      ArrayDeque<ConsumerRecord<byte[], byte[]>> ahead = lease.ahead.remove(tp);
      if (ahead != null) {
        buffer.addAll(ahead);
      }
      if (from < range.until()) {
        active.add(tp);
      }
    }
    pollMs = until.values().stream().allMatch(end -> end == Long.MAX_VALUE) ? OPEN_POLL_MS : POLL_MS;
    consumer.resume(consumer.assignment());
    Set<TopicPartition> done = new HashSet<>(wanted);
    done.removeAll(active);
    consumer.pause(done);
  }

  @Override
  public boolean next() {
    return advance(Long.MAX_VALUE);
  }

  @Override
  public RecordStatus nextWithTimeout(Long startTimeMs, Long timeoutMs) {
    long deadline = System.currentTimeMillis() + Math.max(0L, timeoutMs);
    return RecordStatus.newStatusWithoutArrivalTime(advance(deadline));
  }

  /** The next record of an active partition into {@link #current}; false when every partition
   * reached its end, or at {@code deadline} (real-time mode). */
  private boolean advance(long deadline) {
    try {
      while (true) {
        if (gate != null && !gate.isOpen()) {
          if (!gate.await(deadline)) {
            return false;
          }
          progressed = System.currentTimeMillis();  // the wait is not the source's silence
        }
        ConsumerRecord<byte[], byte[]> record = buffer.poll();
        if (record != null) {
          if (take(record)) {
            return true;
          }
          continue;
        }
        settle();
        if (active.isEmpty()) {
          return false;
        }
        long now = System.currentTimeMillis();
        if (now >= deadline) {
          return false;
        }
        poll(Math.min(pollMs, deadline - now));
        if (buffer.isEmpty() && deadline == Long.MAX_VALUE
            && System.currentTimeMillis() - progressed > input.pollTimeoutMs()) {
          throw new IllegalStateException("Timed out reading " + active + " of the source: no "
              + "record in " + input.pollTimeoutMs() + " ms (kafkaConsumer.pollTimeoutMs)");
        }
      }
    } catch (RuntimeException e) {
      healthy = false;
      throw e;
    }
  }

  private boolean take(ConsumerRecord<byte[], byte[]> record) {
    TopicPartition tp = new TopicPartition(record.topic(), record.partition());
    Long end = until.get(tp);
    Long next = lease.next.get(tp);
    if (end == null || next == null || record.offset() < next) {
      return false;
    }
    if (record.offset() >= end) {
      lease.ahead.computeIfAbsent(tp, t -> new ArrayDeque<>()).add(record);
      finish(tp);
      return false;
    }
    current = rows.row(record);
    lease.next.put(tp, record.offset() + 1);
    progressed = System.currentTimeMillis();
    if (record.offset() + 1 >= end) {
      finish(tp);
    }
    return true;
  }

  /** With nothing buffered: a partition whose consumer position reached its end (past
   * transaction markers and aborted records, which the consumer skips) is done. */
  private void settle() {
    for (TopicPartition tp : List.copyOf(active)) {
      long end = until.get(tp);
      if (end != Long.MAX_VALUE && consumer.position(tp) >= end) {
        lease.next.put(tp, end);
        finish(tp);
      }
    }
  }

  private void finish(TopicPartition tp) {
    if (active.remove(tp) && until.get(tp) != Long.MAX_VALUE) {
      consumer.pause(List.of(tp));
    }
  }

  private void poll(long timeoutMs) {
    ConsumerRecords<byte[], byte[]> records;
    try {
      records = consumer.poll(Duration.ofMillis(timeoutMs));
    } catch (OffsetOutOfRangeException e) {
      lost(e);
      return;
    }
    for (TopicPartition tp : records.partitions()) {
      buffer.addAll(records.records(tp));
    }
  }

  /** Records deleted (retention, DeleteRecords) between planning and reading. A truncated log
   * (an unclean leader election while the batch read) fails the query, naming the offsets. */
  private void lost(OffsetOutOfRangeException e) {
    if (e instanceof LogTruncationException) {
      throw e;
    }
    for (Map.Entry<TopicPartition, Long> entry : e.offsetOutOfRangePartitions().entrySet()) {
      TopicPartition tp = entry.getKey();
      String why = "Cannot fetch offset " + entry.getValue() + " of " + tp
          + ": the source deleted it before it was mirrored, some data may have been missed";
      if (input.failOnDataLoss()) {
        throw new IllegalStateException(why + " (failOnDataLoss is true)", e);
      }
      consumer.seekToBeginning(List.of(tp));
      long start = consumer.position(tp);
      LOG.warn("{}; reading on from offset {}", why, start);
      lease.next.put(tp, start);
    }
  }

  @Override
  public InternalRow get() {
    return current;
  }

  @Override
  public PartitionOffset getOffset() {
    Map<TopicPartition, Long> offsets = new HashMap<>();
    input.ranges().forEach(range -> offsets.put(range.partition(), lease.next.get(range.partition())));
    return new GroupOffset(offsets);
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      for (ConsumerRecord<byte[], byte[]> record : buffer) {
        TopicPartition tp = new TopicPartition(record.topic(), record.partition());
        lease.ahead.computeIfAbsent(tp, t -> new ArrayDeque<>()).add(record);
      }
      buffer.clear();
      ConsumerPool.shared().giveBack(lease, healthy && !Thread.currentThread().isInterrupted());
    } finally {
      OpenReaders.closed(input.run());
    }
  }
}
