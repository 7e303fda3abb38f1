package io.kafkamirror.source;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The executor's Kafka consumers, one per group of a stream, each lent to one task at a time and
 * kept between batches with what it read past its last batch's end: the next batch of the group
 * goes on from there without a new connection, offset lookup or refetch. A consumer idle for
 * {@link #IDLE_MS} is closed (its stream stopped, or its group moved to another executor).
 */
public final class ConsumerPool {
  static final long IDLE_MS = 60_000L;
  private static final Logger LOG = LoggerFactory.getLogger(ConsumerPool.class);
  private static final ConsumerPool SHARED = new ConsumerPool();

  /** A consumer and where it stands: the next offset per partition, and records read ahead. */
  static final class Lease {
    final String key;
    final KafkaConsumer<byte[], byte[]> consumer;
    final Map<TopicPartition, Long> next = new HashMap<>();
    final Map<TopicPartition, ArrayDeque<ConsumerRecord<byte[], byte[]>>> ahead = new HashMap<>();
    long returned;

    Lease(String key, KafkaConsumer<byte[], byte[]> consumer) {
      this.key = key;
      this.consumer = consumer;
    }
  }

  private final Map<String, Lease> idle = new ConcurrentHashMap<>();
  private volatile ScheduledExecutorService evictor;

  public static ConsumerPool shared() {
    return SHARED;
  }

  Lease borrow(String key, Map<String, String> params) {
    Lease lease = idle.remove(key);
    if (lease != null) {
      return lease;
    }
    startEvictor();
    Map<String, Object> config = new HashMap<>(params);
    config.putIfAbsent("client.id", "kafka-mirror-source-" + key);
    return new Lease(key, new KafkaConsumer<>(config));
  }

  /** Takes a lease back; {@code healthy} false closes its consumer instead, on the pool's own
   * thread: a task interrupted by a stop would have its close interrupted (logged as an error). */
  void giveBack(Lease lease, boolean healthy) {
    if (!healthy) {
      startEvictor();
      evictor.execute(() -> close(lease));
      return;
    }
    lease.returned = System.currentTimeMillis();
    Lease displaced = idle.put(lease.key, lease);
    if (displaced != null && displaced != lease) {
      close(displaced);
    }
  }

  void closeStream(String streamId) {
    List<Lease> gone = new ArrayList<>();
    for (Iterator<Map.Entry<String, Lease>> it = idle.entrySet().iterator(); it.hasNext(); ) {
      Map.Entry<String, Lease> entry = it.next();
      if (entry.getKey().startsWith(streamId + "/")) {
        gone.add(entry.getValue());
        it.remove();
      }
    }
    gone.forEach(ConsumerPool::close);
  }

  private void evictIdle() {
    long now = System.currentTimeMillis();
    for (Map.Entry<String, Lease> entry : idle.entrySet()) {
      if (now - entry.getValue().returned > IDLE_MS && idle.remove(entry.getKey(), entry.getValue())) {
        close(entry.getValue());
      }
    }
  }

  private synchronized void startEvictor() {
    if (evictor == null) {
      evictor = Executors.newSingleThreadScheduledExecutor(runnable -> {
        Thread thread = new Thread(runnable, "kafka-mirror-consumer-evictor");
        thread.setDaemon(true);
        return thread;
      });
      evictor.scheduleWithFixedDelay(this::evictIdle, IDLE_MS / 2, IDLE_MS / 2,
          TimeUnit.MILLISECONDS);
    }
  }

  private static void close(Lease lease) {
    try {
      lease.consumer.close(Duration.ofSeconds(5));
    } catch (RuntimeException e) {
      LOG.warn("closing the consumer of {}: {}", lease.key, e.toString());
    }
  }
}
