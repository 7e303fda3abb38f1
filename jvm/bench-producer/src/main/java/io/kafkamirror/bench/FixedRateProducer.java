package io.kafkamirror.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The benchmark's fixed-rate producer: records at a steady rate, round-robin over the partitions
 * of each stream, open loop (it keeps its schedule when the broker is slow, so that stalls show as
 * latency, not as fewer records). Kafka's Java producer puts every partition of a broker that has
 * a batch ready into one ProduceRequest, so 2,000 partitions at 2,000 records/s cost a request per
 * linger interval, not a request per record as one-partition-per-request clients pay.
 *
 * <p>Each value starts with {@code "%03d|%019d|"}: the phase and the produce time (ns since the
 * epoch, taken right before {@code send}); the rest is filler bytes read from a file. Keys are
 * {@code key-%010d} of a running sequence. Commands, one per line on stdin:
 *
 * <pre>
 *   stream NAME TOPIC PHASE RATE P0,P1,...   start or replace a stream (waits for the partitions)
 *   stop NAME                                end a stream
 *   counts                                   flush, then answer (below)
 *   exit                                     flush, answer, and end (as does the end of stdin)
 * </pre>
 *
 * The answer is lines on stdout, {@code count PHASE TOPIC PARTITION N} (records the source
 * acknowledged), {@code first NAME NS} (each stream's first produce time), {@code failed N},
 * {@code error TEXT} (the first few), then {@code end}.
 */
public final class FixedRateProducer {

  static final int STAMP_LEN = 24;
  private static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(2);
  private static final long PARTITION_WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);
  private static final int MAX_ERRORS = 100;
  static final long BUFFER_MEMORY = 128L * 1024 * 1024;

  /** Where the records of a stream are counted. */
  record Ident(int phase, String topic, int partition) {}

  static final class Stream {
    final String topic;
    final int[] partitions;
    final double rate;
    final int phase;
    final long startedNanos;
    long sent;

    Stream(String topic, int[] partitions, double rate, int phase, long startedNanos) {
      this.topic = topic;
      this.partitions = partitions;
      this.rate = rate;
      this.phase = phase;
      this.startedNanos = startedNanos;
    }

    /** Records due at {@code nowNanos} and not sent yet. */
    long due(long nowNanos) {
      return (long) ((nowNanos - startedNanos) / 1e9 * rate) - sent;
    }
  }

  private final Producer<byte[], byte[]> producer;
  private final byte[] filler;
  private final int recordSize;
  private final LongSupplier monotonic;
  private final LongSupplier epochNanos;
  private final Map<String, Stream> streams = new LinkedHashMap<>();
  private final Map<Ident, LongAdder> counts = new ConcurrentHashMap<>();
  private final Map<String, Long> firstNanos = new LinkedHashMap<>();
  private final AtomicLong failed = new AtomicLong();
  private final List<String> errors = java.util.Collections.synchronizedList(new ArrayList<>());
  private final Latencies acked = new Latencies();
  private long seq;
  private long slowestTickNanos;

  FixedRateProducer(Producer<byte[], byte[]> producer, byte[] filler, int recordSize,
      LongSupplier monotonic, LongSupplier epochNanos) {
    this.producer = producer;
    this.filler = filler;
    this.recordSize = recordSize;
    this.monotonic = monotonic;
    this.epochNanos = epochNanos;
  }

  static String stamp(int phase, long produceNanos) {
    return String.format("%03d|%019d|", phase, produceNanos);
  }

  /** Carries out one command line; returns false when the process should end. */
  boolean handle(String line, PrintStream out) {
    String[] words = line.trim().split("\\s+");
    switch (words[0]) {
      case "stream" -> {
        if (words.length != 6) {
          throw new IllegalArgumentException("stream NAME TOPIC PHASE RATE PARTITIONS: " + line);
        }
        String[] parts = words[5].split(",");
        int[] partitions = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
          partitions[i] = Integer.parseInt(parts[i]);
        }
        awaitPartitions(words[2], partitions);
        streams.put(words[1], new Stream(words[2], partitions, Double.parseDouble(words[4]),
            Integer.parseInt(words[3]), monotonic.getAsLong()));
        return true;
      }
      case "stop" -> {
        streams.remove(words[1]);
        return true;
      }
      case "counts" -> {
        answer(out);
        return true;
      }
      case "exit" -> {
        answer(out);
        return false;
      }
      default -> throw new IllegalArgumentException("unknown command: " + line);
    }
  }

  /** Sends every record due now; returns how many. */
  int tick() {
    long now = monotonic.getAsLong();
    try {
      return sendDue(now);
    } finally {
      slowestTickNanos = Math.max(slowestTickNanos, monotonic.getAsLong() - now);
    }
  }

  private int sendDue(long now) {
    int total = 0;
    for (Map.Entry<String, Stream> entry : streams.entrySet()) {
      Stream stream = entry.getValue();
      for (long due = stream.due(now); due > 0; due--) {
        int partition = stream.partitions[(int) (stream.sent % stream.partitions.length)];
        long produceNanos = epochNanos.getAsLong();
        byte[] value = value(stream.phase, produceNanos);
        byte[] key = String.format("key-%010d", seq).getBytes(StandardCharsets.US_ASCII);
        Ident ident = new Ident(stream.phase, stream.topic, partition);
        producer.send(new ProducerRecord<>(stream.topic, partition, key, value),
            (metadata, exception) -> delivered(ident, produceNanos, exception));
        if (stream.sent == 0) {
          firstNanos.put(entry.getKey(), produceNanos);
        }
        seq++;
        stream.sent++;
        total++;
      }
    }
    return total;
  }

  byte[] value(int phase, long produceNanos) {
    byte[] head = stamp(phase, produceNanos).getBytes(StandardCharsets.US_ASCII);
    int fill = Math.max(0, Math.min(filler.length, recordSize - STAMP_LEN));
    byte[] value = new byte[head.length + fill];
    System.arraycopy(head, 0, value, 0, head.length);
    System.arraycopy(filler, 0, value, head.length, fill);
    return value;
  }

  private void delivered(Ident ident, long produceNanos, Exception exception) {
    if (exception == null) {
      counts.computeIfAbsent(ident, k -> new LongAdder()).increment();
      acked.add(epochNanos.getAsLong() - produceNanos);
      return;
    }
    failed.incrementAndGet();
    if (errors.size() < MAX_ERRORS) {
      errors.add("not delivered to " + ident.topic() + "[" + ident.partition() + "]: "
          + exception);
    }
  }

  private void awaitPartitions(String topic, int[] partitions) {
    long deadline = monotonic.getAsLong() + PARTITION_WAIT_NANOS;
    while (monotonic.getAsLong() < deadline) {
      Map<Integer, Boolean> led = new LinkedHashMap<>();
      for (PartitionInfo info : producer.partitionsFor(topic)) {
        led.put(info.partition(), info.leader() != null && info.leader().id() >= 0);
      }
      boolean all = true;
      for (int p : partitions) {
        all &= Boolean.TRUE.equals(led.get(p));
      }
      if (all) {
        return;
      }
      sleep(TimeUnit.MILLISECONDS.toNanos(50));
    }
  }

  void answer(PrintStream out) {
    producer.flush();
    StringBuilder text = new StringBuilder();
    for (Map.Entry<Ident, LongAdder> e : counts.entrySet()) {
      Ident id = e.getKey();
      text.append("count ").append(id.phase()).append(' ').append(id.topic()).append(' ')
          .append(id.partition()).append(' ').append(e.getValue().sum()).append('\n');
    }
    for (Map.Entry<String, Long> e : firstNanos.entrySet()) {
      text.append("first ").append(e.getKey()).append(' ').append(e.getValue()).append('\n');
    }
    text.append("failed ").append(failed.get()).append('\n');
    text.append("acked_ms ").append(acked.summary()).append('\n');
    text.append("sent ").append(seq).append(' ')
        .append(String.format(java.util.Locale.ROOT, "%.3f", slowestTickNanos / 1e6)).append('\n');
    synchronized (errors) {
      for (String error : errors.subList(0, Math.min(5, errors.size()))) {
        text.append("error ").append(error.replace('\n', ' ')).append('\n');
      }
    }
    text.append("end\n");
    out.print(text);
    out.flush();
  }

  private static void sleep(long nanos) {
    try {
      TimeUnit.NANOSECONDS.sleep(nanos);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static long epochNanosNow() {
    Instant now = Instant.now();
    return now.getEpochSecond() * 1_000_000_000L + now.getNano();
  }

  static Properties producerConfig(String bootstrap, String compression) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
    props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    // Every partition with a record waiting holds a batch.size buffer (16 KiB) of buffer.memory:
    // at the default 32 MiB, 2,000 partitions use it all and send() blocks (measured: 21 s).
    props.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(BUFFER_MEMORY));
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    return props;
  }

  /** {@code FixedRateProducer BOOTSTRAP RECORD_SIZE COMPRESSION FILLER_FILE}. */
  public static void main(String[] args) throws IOException, InterruptedException {
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    if (args.length != 4) {
      System.err.println("usage: FixedRateProducer BOOTSTRAP RECORD_SIZE COMPRESSION FILLER_FILE");
      System.exit(2);
    }
    byte[] filler = Files.readAllBytes(Path.of(args[3]));
    BlockingQueue<String> commands = new LinkedBlockingQueue<>();
    Thread reader = new Thread(() -> {
      try (BufferedReader in = new BufferedReader(
          new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        for (String line = in.readLine(); line != null; line = in.readLine()) {
          if (!line.isBlank()) {
            commands.add(line);
          }
        }
      } catch (IOException e) {
        // stdin gone: the parent ended
      }
      commands.add("exit");
    }, "commands");
    reader.setDaemon(true);
    reader.start();
    try (KafkaProducer<byte[], byte[]> kafka =
        new KafkaProducer<>(producerConfig(args[0], args[2]))) {
      FixedRateProducer self = new FixedRateProducer(kafka, filler, Integer.parseInt(args[1]),
          System::nanoTime, FixedRateProducer::epochNanosNow);
      while (true) {
        for (String line = commands.poll(); line != null; line = commands.poll()) {
          if (!self.handle(line, System.out)) {
            return;
          }
        }
        self.tick();
        String next = commands.poll(TICK_NANOS, TimeUnit.NANOSECONDS);
        if (next != null && !self.handle(next, System.out)) {
          return;
        }
      }
    }
  }
}
