package io.kafkamirror.source;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's side of the source: the offsets of every batch, and its groups of partitions.
 *
 * <p>Each assigned partition belongs to one group for as long as the stream runs (its place in the
 * assignment modulo {@code groups}), and each group is read by one Spark task through one Kafka
 * consumer, which the executor keeps between batches ({@link ConsumerPool}): one fetch session
 * for many partitions, as a MirrorMaker 2 task reads them. A micro-batch plans only the
 * partitions that have new records, so idle partitions cost nothing but their place in one
 * ListOffsets request per batch. In real-time mode every group is one long-running task: the
 * stream needs a task slot per group, not per partition.
 */
public final class GroupedKafkaStream
    implements MicroBatchStream, SupportsAdmissionControl, SupportsRealTimeMode {
  private static final Logger LOG = LoggerFactory.getLogger(GroupedKafkaStream.class);

  private final SourceOptions options;
  private final InitialOffsets initial;
  private final String streamId = UUID.randomUUID().toString();
  private final Map<TopicPartition, Integer> groupOf = new HashMap<>();
  /** Used on {@link #offsetsThread} only (but {@link #stop} wakes it up). */
  private volatile KafkaConsumer<byte[], byte[]> offsetReader;
  private final ExecutorService offsetsThread = Executors.newSingleThreadExecutor(runnable -> {
    Thread thread = new Thread(runnable, "kafka-mirror-offsets");
    thread.setDaemon(true);
    return thread;
  });
  private PartitionOffsets latest;
  /** Whether the last ListOffsets found nothing new, and when it was sent. */
  private boolean idle;
  private long listed;
  /**
   * With nothing new, Spark asks for the latest offsets again every 10 ms
   * ({@code spark.sql.streaming.pollingDelay}): one ListOffsets for every partition each time,
   * most of a core at 2,000 partitions. An idle stream lists them again only after 1 ms per 20
   * partitions (at most 250 ms): nothing for a few dozen partitions, 100 ms at 2,000.
   */
  private final long idleCheckNanos;

  public GroupedKafkaStream(SourceOptions options, InitialOffsets initial) {
    this.options = options;
    this.initial = initial;
    this.idleCheckNanos = Math.min(250L, options.partitions().size() / 20L) * 1_000_000L;
    List<TopicPartition> partitions = options.partitions();
    for (int i = 0; i < partitions.size(); i++) {
      groupOf.put(partitions.get(i), i % options.groups());
    }
  }

  /**
   * Runs {@code call} with the driver's consumer on the stream's own offsets thread. A stop of
   * the query interrupts Spark's stream thread: in Kafka's consumer that is an {@code
   * InterruptException} the query ends with as an error (logged as one); waiting here instead
   * ends with the {@link InterruptedException} Spark takes for a stop, and the consumer, never
   * interrupted, finishes its request and is closed on its own thread.
   */
  private <T> T offsets(Function<KafkaConsumer<byte[], byte[]>, T> call) {
    Future<T> result = offsetsThread.submit(() -> call.apply(reader()));
    try {
      return result.get();
    } catch (InterruptedException e) {
      throw sneaky(e);
    } catch (ExecutionException e) {
      throw sneaky(e.getCause());
    }
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }

  private KafkaConsumer<byte[], byte[]> reader() {
    if (offsetReader == null) {
      Map<String, Object> params = new HashMap<>(options.kafkaParams());
      params.putIfAbsent("client.id", "kafka-mirror-offsets-" + streamId.substring(0, 8));
      offsetReader = new KafkaConsumer<>(params);
    }
    return offsetReader;
  }

  private Map<TopicPartition, Long> ends() {
    return offsets(consumer -> consumer.endOffsets(
        options.partitions(), Duration.ofMillis(options.pollTimeoutMs())));
  }

  private Map<TopicPartition, Long> starts(List<TopicPartition> partitions) {
    return offsets(consumer -> consumer.beginningOffsets(
        partitions, Duration.ofMillis(options.pollTimeoutMs())));
  }

  @Override
  public synchronized Offset initialOffset() {
    return initial.getOrCreate(this::resolveStart);
  }

  private PartitionOffsets resolveStart() {
    String starting = options.startingOffsets().trim();
    if (starting.equalsIgnoreCase("earliest")) {
      return new PartitionOffsets(starts(options.partitions()));
    }
    if (starting.equalsIgnoreCase("latest")) {
      return new PartitionOffsets(ends());
    }
    Map<TopicPartition, Long> given = PartitionOffsets.parse(starting).offsets();
    List<TopicPartition> missing = new ArrayList<>();
    for (TopicPartition tp : options.partitions()) {
      if (!given.containsKey(tp)) {
        missing.add(tp);
      }
    }
    if (!missing.isEmpty()) {
      throw new IllegalArgumentException("option startingOffsets names no offset for " + missing);
    }
    Map<TopicPartition, Long> resolved = new LinkedHashMap<>();
    Map<TopicPartition, Long> ends = null;
    Map<TopicPartition, Long> logStarts = null;
    for (TopicPartition tp : options.partitions()) {
      long offset = given.get(tp);
      if (offset == PartitionOffsets.LATEST) {
        ends = ends == null ? ends() : ends;
        offset = ends.get(tp);
      } else if (offset == PartitionOffsets.EARLIEST) {
        logStarts = logStarts == null ? starts(options.partitions()) : logStarts;
        offset = logStarts.get(tp);
      }
      resolved.put(tp, offset);
    }
    return new PartitionOffsets(resolved);
  }

  @Override
  public Offset deserializeOffset(String json) {
    return PartitionOffsets.parse(json);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return options.maxOffsetsPerTrigger() == Long.MAX_VALUE
        ? ReadLimit.allAvailable()
        : ReadLimit.maxRows(options.maxOffsetsPerTrigger());
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is to be called");
  }

  @Override
  public synchronized Offset latestOffset(Offset start, ReadLimit limit) {
    Map<TopicPartition, Long> from = ((PartitionOffsets) start).offsets();
    long now = System.nanoTime();
    Map<TopicPartition, Long> ends;
    if (idle && latest != null && now - listed < idleCheckNanos) {
      ends = latest.offsets();
    } else {
      ends = ends();
      listed = now;
      latest = new PartitionOffsets(ends);
      idle = true;
      for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
        if (end.getValue() > from.getOrDefault(end.getKey(), end.getValue())) {
          idle = false;
          break;
        }
      }
    }
    if (limit instanceof ReadMaxRows max) {
      return new PartitionOffsets(Limits.limited(from, ends, max.maxRows()));
    }
    return new PartitionOffsets(ends);
  }

  @Override
  public synchronized Offset reportLatestOffset() {
    return latest;
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    Map<TopicPartition, Long> from = ((PartitionOffsets) start).offsets();
    Map<TopicPartition, Long> until = ((PartitionOffsets) end).offsets();
    List<PartitionRange> ranges = new ArrayList<>();
    for (TopicPartition tp : options.partitions()) {
      Long last = until.get(tp);
      if (last == null) {
        continue;
      }
      long first = from.getOrDefault(tp, PartitionOffsets.EARLIEST);
      if (first > last) {
        String why = "Partition " + tp + "'s offset was changed from " + first + " to " + last
            + ", some data may have been missed";
        if (options.failOnDataLoss()) {
          throw new IllegalStateException(why + " (failOnDataLoss is true)");
        }
        // as Spark's Kafka source: nothing of it in this batch; the next one starts at its end
        LOG.warn("{}; the next batch reads on from offset {}", why, last);
        continue;
      }
      if (first != last) {
        ranges.add(new PartitionRange(tp, first, last));
      }
    }
    return grouped(ranges);
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start) {
    Map<TopicPartition, Long> from = ((PartitionOffsets) start).offsets();
    List<PartitionRange> ranges = new ArrayList<>();
    for (TopicPartition tp : options.partitions()) {
      ranges.add(new PartitionRange(
          tp, from.getOrDefault(tp, PartitionOffsets.EARLIEST), Long.MAX_VALUE));
    }
    return grouped(ranges);
  }

  private InputPartition[] grouped(List<PartitionRange> ranges) {
    Map<Integer, List<PartitionRange>> groups = new TreeMap<>();
    for (PartitionRange range : ranges) {
      groups.computeIfAbsent(groupOf.get(range.partition()), g -> new ArrayList<>()).add(range);
    }
    List<InputPartition> planned = new ArrayList<>();
    groups.forEach((group, members) -> planned.add(new GroupInputPartition(
        streamId + "/" + group, members, new HashMap<>(options.kafkaParams()),
        options.pollTimeoutMs(), options.failOnDataLoss(), options.writeGate(),
        options.run())));
    return planned.toArray(new InputPartition[0]);
  }

  @Override
  public Offset mergeOffsets(PartitionOffset[] offsets) {
    Map<TopicPartition, Long> merged = new HashMap<>();
    for (PartitionOffset offset : offsets) {
      merged.putAll(((GroupOffset) offset).offsets());
    }
    return new PartitionOffsets(merged);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new GroupReaderFactory();
  }

  @Override
  public void commit(Offset end) {}

  @Override
  public synchronized void stop() {
    // a request still under way (a topic deleted meanwhile: the consumer asks for its metadata
    // until pollTimeoutMs, warning at each answer) ends now, and the consumer is closed next
    KafkaConsumer<byte[], byte[]> busy = offsetReader;
    if (busy != null) {
      busy.wakeup();
    }
    offsetsThread.execute(() -> {
      KafkaConsumer<byte[], byte[]> reader = offsetReader;
      offsetReader = null;
      if (reader != null) {
        try {
          reader.close(Duration.ofSeconds(5));
        } catch (WakeupException e) {
          // the wake-up found no request under way: the consumer is closed all the same
        }
      }
    });
    offsetsThread.shutdown();
    ConsumerPool.shared().closeStream(streamId);
  }

  @Override
  public String toString() {
    return "KafkaMirrorGroups[" + options.partitions().size() + " partitions in "
        + Math.min(options.groups(), options.partitions().size()) + " groups]";
  }
}
