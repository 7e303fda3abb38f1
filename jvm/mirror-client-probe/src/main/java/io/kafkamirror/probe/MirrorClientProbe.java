package io.kafkamirror.probe;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.OffsetSync;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;

/**
 * Reads MirrorMaker 2's internal records (checkpoints, heartbeats, offset syncs) and topic-name
 * conventions through Kafka's own {@code connect-mirror-client} library, printing one line of JSON.
 *
 * <pre>
 * java -Xmx128m -cp &lt;jar&gt;:&lt;lib/*&gt; io.kafkamirror.probe.MirrorClientProbe &lt;command&gt; &lt;properties-file&gt; [args]
 * </pre>
 *
 * <p>The properties file is passed whole to {@link MirrorClient} / {@link RemoteClusterUtils} (so
 * {@code replication.policy.class}, {@code replication.policy.separator}, security settings, ...
 * are honoured). Exit status 0 with one JSON line on stdout, or 1 with a message on stderr.
 */
public final class MirrorClientProbe {
    static final long DEFAULT_TIMEOUT_MS = 30_000L;
    static final String PREFIX = "mirror-client-probe: ";
    static final String USAGE = String.join("\n",
        "usage: MirrorClientProbe <command> <properties-file> [args]",
        "commands:",
        "  translate <remoteClusterAlias> <groupId> [timeoutMs]   RemoteClusterUtils.translateOffsets",
        "  remote-offsets <remoteClusterAlias> <groupId> [timeoutMs]   MirrorClient.remoteConsumerOffsets",
        "  hops <sourceClusterAlias>                              MirrorClient.replicationHops",
        "  upstream                                               MirrorClient.upstreamClusters",
        "  heartbeat-topics | checkpoint-topics                   MirrorClient.heartbeatTopics / checkpointTopics",
        "  remote-topics [sourceClusterAlias]                     MirrorClient.remoteTopics",
        "  decode-checkpoints <topic> [timeoutMs]                 Checkpoint.deserializeRecord over partition 0",
        "  decode-heartbeats <topic> [timeoutMs]                  Heartbeat.deserializeRecord over partition 0",
        "  decode-offset-syncs <topic> [timeoutMs]                OffsetSync.deserializeRecord over partition 0",
        "timeoutMs defaults to " + DEFAULT_TIMEOUT_MS + ".");

    private static final String LOG_LEVEL_PROPERTY = "org.slf4j.simpleLogger.defaultLogLevel";

    /** What may follow a command's required arguments. */
    enum Extra { NONE, TIMEOUT, SOURCE_ALIAS }

    enum Command {
        TRANSLATE("translate", Extra.TIMEOUT, "remoteClusterAlias", "groupId"),
        REMOTE_OFFSETS("remote-offsets", Extra.TIMEOUT, "remoteClusterAlias", "groupId"),
        HOPS("hops", Extra.NONE, "sourceClusterAlias"),
        UPSTREAM("upstream", Extra.NONE),
        HEARTBEAT_TOPICS("heartbeat-topics", Extra.NONE),
        CHECKPOINT_TOPICS("checkpoint-topics", Extra.NONE),
        REMOTE_TOPICS("remote-topics", Extra.SOURCE_ALIAS),
        DECODE_CHECKPOINTS("decode-checkpoints", Extra.TIMEOUT, "topic"),
        DECODE_HEARTBEATS("decode-heartbeats", Extra.TIMEOUT, "topic"),
        DECODE_OFFSET_SYNCS("decode-offset-syncs", Extra.TIMEOUT, "topic");

        final String word;
        final Extra optional;
        final List<String> required;

        Command(String word, Extra optional, String... required) {
            this.word = word;
            this.optional = optional;
            this.required = List.of(required);
        }

        static Command of(String word) throws UsageException {
            for (Command c : values()) {
                if (c.word.equals(word)) {
                    return c;
                }
            }
            throw new UsageException("unknown command: " + word);
        }
    }

    /** A bad command line. */
    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    /** A parsed command line; {@code sourceAlias} is only set for {@code remote-topics <alias>}. */
    record Invocation(Command command, Path propertiesFile, List<String> args, Duration timeout,
                      String sourceAlias) {
    }

    private MirrorClientProbe() {
    }

    public static void main(String[] argv) {
        if (System.getProperty(LOG_LEVEL_PROPERTY) == null) {
            System.setProperty(LOG_LEVEL_PROPERTY, "warn");
        }
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        int rc = run(argv, out, System.err);
        out.flush();
        System.err.flush();
        // Kafka clients are closed by now; exit explicitly so no stray thread keeps the JVM alive.
        System.exit(rc);
    }

    /** Runs one command; returns the exit status. */
    static int run(String[] argv, PrintStream out, PrintStream err) {
        try {
            Invocation invocation = parse(argv);
            Map<String, Object> props = loadProperties(invocation.propertiesFile());
            out.println(Json.write(execute(invocation, props)));
            return 0;
        } catch (UsageException e) {
            err.println(PREFIX + e.getMessage());
            err.println(USAGE);
            return 1;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            err.println(PREFIX + "interrupted");
            return 1;
        } catch (Exception e) {
            err.println(PREFIX + describe(e));
            e.printStackTrace(err);
            return 1;
        }
    }

    static Invocation parse(String[] argv) throws UsageException {
        if (argv.length < 2) {
            throw new UsageException(argv.length == 0 ? "missing command" : "missing properties file");
        }
        Command command = Command.of(argv[0]);
        Path propertiesFile = Path.of(argv[1]);
        List<String> rest = Arrays.asList(argv).subList(2, argv.length);
        int required = command.required.size();
        int max = required + (command.optional == Extra.NONE ? 0 : 1);
        if (rest.size() < required) {
            throw new UsageException(command.word + ": missing " + String.join(" ", command.required.subList(rest.size(), required)));
        }
        if (rest.size() > max) {
            throw new UsageException(command.word + ": too many arguments: " + String.join(" ", rest.subList(max, rest.size())));
        }
        for (int i = 0; i < rest.size(); i++) {
            if (rest.get(i).isEmpty()) {
                throw new UsageException(command.word + ": empty argument " + (i + 1));
            }
        }
        List<String> args = List.copyOf(rest.subList(0, required));
        Duration timeout = Duration.ofMillis(DEFAULT_TIMEOUT_MS);
        String sourceAlias = null;
        if (rest.size() > required) {
            String extra = rest.get(required);
            if (command.optional == Extra.TIMEOUT) {
                timeout = Duration.ofMillis(parseTimeout(command, extra));
            } else {
                sourceAlias = extra;
            }
        }
        return new Invocation(command, propertiesFile, args, timeout, sourceAlias);
    }

    private static long parseTimeout(Command command, String text) throws UsageException {
        long ms;
        try {
            ms = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new UsageException(command.word + ": timeoutMs is not an integer: " + text);
        }
        if (ms <= 0) {
            throw new UsageException(command.word + ": timeoutMs must be positive: " + text);
        }
        return ms;
    }

    /** The properties file as a config map (UTF-8, java.util.Properties syntax). */
    static Map<String, Object> loadProperties(Path file) throws IOException {
        Properties properties = new Properties();
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            properties.load(reader);
        }
        Map<String, Object> props = new LinkedHashMap<>();
        for (String name : new TreeSet<>(properties.stringPropertyNames())) {
            props.put(name, properties.getProperty(name));
        }
        return props;
    }

    static Object execute(Invocation invocation, Map<String, Object> props) throws Exception {
        List<String> args = invocation.args();
        Duration timeout = invocation.timeout();
        switch (invocation.command()) {
            case TRANSLATE:
                try (MirrorClient client = new MirrorClient(props)) {
                    requireCheckpointsTopic(props, client, args.get(0), timeout);
                }
                return offsetsJson(RemoteClusterUtils.translateOffsets(props, args.get(0), args.get(1), timeout));
            case REMOTE_OFFSETS:
                try (MirrorClient client = new MirrorClient(props)) {
                    requireCheckpointsTopic(props, client, args.get(0), timeout);
                    return offsetsJson(client.remoteConsumerOffsets(args.get(1), args.get(0), timeout));
                }
            case HOPS:
                try (MirrorClient client = new MirrorClient(props)) {
                    return object("hops", client.replicationHops(args.get(0)));
                }
            case UPSTREAM:
                try (MirrorClient client = new MirrorClient(props)) {
                    return object("upstream", sorted(client.upstreamClusters()));
                }
            case HEARTBEAT_TOPICS:
                try (MirrorClient client = new MirrorClient(props)) {
                    return object("topics", sorted(client.heartbeatTopics()));
                }
            case CHECKPOINT_TOPICS:
                try (MirrorClient client = new MirrorClient(props)) {
                    return object("topics", sorted(client.checkpointTopics()));
                }
            case REMOTE_TOPICS:
                try (MirrorClient client = new MirrorClient(props)) {
                    Set<String> topics = invocation.sourceAlias() == null
                        ? client.remoteTopics() : client.remoteTopics(invocation.sourceAlias());
                    return object("topics", sorted(topics));
                }
            case DECODE_CHECKPOINTS:
                return object("checkpoints", decode(props, args.get(0), timeout, MirrorClientProbe::checkpointJson));
            case DECODE_HEARTBEATS:
                return object("heartbeats", decode(props, args.get(0), timeout, MirrorClientProbe::heartbeatJson));
            case DECODE_OFFSET_SYNCS:
                return object("syncs", decode(props, args.get(0), timeout, MirrorClientProbe::offsetSyncJson));
            default:
                throw new IllegalStateException("unhandled command " + invocation.command());
        }
    }

    // ------------------------------------------------------------------ JSON shapes

    static Map<String, Object> offsetsJson(Map<TopicPartition, OffsetAndMetadata> offsets) {
        List<Map.Entry<TopicPartition, OffsetAndMetadata>> entries = new ArrayList<>(offsets.entrySet());
        entries.sort(Comparator.comparing((Map.Entry<TopicPartition, OffsetAndMetadata> e) -> e.getKey().topic())
            .thenComparingInt(e -> e.getKey().partition()));
        List<Object> out = new ArrayList<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : entries) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("topic", e.getKey().topic());
            item.put("partition", e.getKey().partition());
            item.put("offset", e.getValue().offset());
            item.put("metadata", e.getValue().metadata());
            out.add(item);
        }
        return object("offsets", out);
    }

    static Map<String, Object> checkpointJson(ConsumerRecord<byte[], byte[]> record) {
        Checkpoint checkpoint = Checkpoint.deserializeRecord(record);
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("group", checkpoint.consumerGroupId());
        item.put("topic", checkpoint.topicPartition().topic());
        item.put("partition", checkpoint.topicPartition().partition());
        item.put("upstreamOffset", checkpoint.upstreamOffset());
        item.put("offset", checkpoint.downstreamOffset());
        item.put("metadata", checkpoint.metadata());
        return item;
    }

    static Map<String, Object> heartbeatJson(ConsumerRecord<byte[], byte[]> record) {
        Heartbeat heartbeat = Heartbeat.deserializeRecord(record);
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("source", heartbeat.sourceClusterAlias());
        item.put("target", heartbeat.targetClusterAlias());
        item.put("timestamp", heartbeat.timestamp());
        return item;
    }

    static Map<String, Object> offsetSyncJson(ConsumerRecord<byte[], byte[]> record) {
        OffsetSync sync = OffsetSync.deserializeRecord(record);
        Map<String, Object> item = new LinkedHashMap<>();
        item.put("topic", sync.topicPartition().topic());
        item.put("partition", sync.topicPartition().partition());
        item.put("upstreamOffset", sync.upstreamOffset());
        item.put("offset", sync.downstreamOffset());
        return item;
    }

    private static Map<String, Object> object(String key, Object value) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put(key, value);
        return out;
    }

    private static List<String> sorted(Collection<String> items) {
        return new ArrayList<>(new TreeSet<>(items));
    }

    // ------------------------------------------------------------------ reading partition 0

    /**
     * Fails fast when the checkpoints topic that {@code remoteConsumerOffsets} would read is absent.
     * Kafka's own code does not check: its consumer's {@code endOffsets}/{@code position} calls then
     * block for {@code default.api.timeout.ms} (60 s; the caller's timeout does not bound them, and
     * MirrorClient passes only bootstrap/security keys to its consumer) and end in a
     * TimeoutException, instead of returning no offsets.
     */
    private static void requireCheckpointsTopic(Map<String, Object> props, MirrorClient client, String alias,
                                                Duration timeout) {
        String topic = client.replicationPolicy().checkpointsTopic(alias);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                readerConfig(props), new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<PartitionInfo> partitions = consumer.partitionsFor(topic, timeout);
            if (partitions == null || partitions.isEmpty()) {
                throw new IllegalStateException("checkpoints topic " + topic + " for alias " + alias
                    + " does not exist (Kafka's MirrorClient would block for default.api.timeout.ms"
                    + " and then throw a TimeoutException)");
            }
        }
    }

    /** Decodes every record of partition 0 of {@code topic}, from the beginning to the end offset. */
    static List<Object> decode(Map<String, Object> props, String topic, Duration timeout,
                               Function<ConsumerRecord<byte[], byte[]>, Map<String, Object>> decoder) {
        List<Object> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> record : readPartitionZero(props, topic, timeout)) {
            if (record.key() == null || record.value() == null) {
                throw new IllegalStateException(String.format(Locale.ROOT,
                    "record at offset %d of %s-0 has a null %s", record.offset(), topic,
                    record.key() == null ? "key" : "value (tombstone)"));
            }
            try {
                out.add(decoder.apply(record));
            } catch (RuntimeException e) {
                throw new IllegalStateException(String.format(Locale.ROOT,
                    "cannot decode record at offset %d of %s-0: %s", record.offset(), topic, describe(e)), e);
            }
        }
        return out;
    }

    /** The consumer settings for reading: the file's consumer keys, no group, no auto-creation. */
    static Map<String, Object> readerConfig(Map<String, Object> props) {
        Map<String, Object> config = new LinkedHashMap<>(props);
        config.keySet().retainAll(ConsumerConfig.configNames());
        config.remove(ConsumerConfig.GROUP_ID_CONFIG);
        config.remove(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false");
        config.putIfAbsent(ConsumerConfig.CLIENT_ID_CONFIG, "mirror-client-probe");
        return config;
    }

    private static List<ConsumerRecord<byte[], byte[]>> readPartitionZero(Map<String, Object> props, String topic,
                                                                          Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        TopicPartition tp = new TopicPartition(topic, 0);
        List<TopicPartition> assignment = List.of(tp);
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                readerConfig(props), new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<PartitionInfo> partitions = consumer.partitionsFor(topic, remaining(deadline));
            if (partitions == null || partitions.isEmpty()) {
                throw new IllegalStateException("topic " + topic + " does not exist");
            }
            consumer.assign(assignment);
            consumer.seekToBeginning(assignment);
            long end = consumer.endOffsets(assignment, remaining(deadline)).get(tp);
            while (true) {
                Duration left = remaining(deadline);
                if (left.isZero()) {
                    throw new TimeoutException("reading " + tp + " up to offset " + end + " took longer than "
                        + timeout.toMillis() + " ms");
                }
                if (consumer.position(tp, left) >= end) {
                    break;
                }
                left = remaining(deadline);
                Duration wait = left.compareTo(Duration.ofMillis(500)) < 0 ? left : Duration.ofMillis(500);
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(wait)) {
                    if (record.offset() < end) {
                        records.add(record);
                    }
                }
            }
        }
        return records;
    }

    private static Duration remaining(long deadline) {
        long left = deadline - System.nanoTime();
        return left <= 0 ? Duration.ZERO : Duration.ofNanos(left);
    }

    /** "ExceptionClass: message" for an exception and its causes. */
    static String describe(Throwable e) {
        StringBuilder out = new StringBuilder();
        Throwable current = e;
        int depth = 0;
        while (current != null && depth < 5) {
            if (depth > 0) {
                out.append("; caused by ");
            }
            out.append(current.getClass().getName());
            if (current.getMessage() != null) {
                out.append(": ").append(current.getMessage());
            }
            current = current.getCause() == current ? null : current.getCause();
            depth++;
        }
        return out.toString();
    }
}
