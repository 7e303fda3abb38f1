package io.kafkamirror.probe;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MirrorClientProbeTest {

  @TempDir
  Path tmp;

  /** Exit status, stdout and stderr of one {@link MirrorClientProbe#run} call. */
  private record Result(int rc, String out, String err) {
  }

  private static Result run(String... argv) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int rc;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
         PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      rc = MirrorClientProbe.run(argv, o, e);
    }
    return new Result(rc, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  private static void assertUsageError(Result result, String message) {
    assertEquals(1, result.rc());
    assertEquals("", result.out());
    assertTrue(result.err().startsWith(MirrorClientProbe.PREFIX + message), result.err());
    assertTrue(result.err().contains("usage: MirrorClientProbe"), result.err());
  }

  private Path props(String text) throws IOException {
    Path file = tmp.resolve("client.properties");
    Files.writeString(file, text, StandardCharsets.UTF_8);
    return file;
  }

  private static ConsumerRecord<byte[], byte[]> record(String keyHex, String valueHex) {
    HexFormat hex = HexFormat.of();
    return new ConsumerRecord<>("t", 0, 42L, hex.parseHex(keyHex.replace(" ", "")),
        hex.parseHex(valueHex.replace(" ", "")));
  }

  // ---------------------------------------------------------------- argument errors

  @Test
  void missingCommand() {
    assertUsageError(run(), "missing command");
  }

  @Test
  void missingPropertiesFile() {
    assertUsageError(run("upstream"), "missing properties file");
  }

  @Test
  void unknownCommand() {
    assertUsageError(run("translate-all", "x.properties"), "unknown command: translate-all");
  }

  @Test
  void missingRequiredArguments() {
    assertUsageError(run("translate", "x.properties"), "translate: missing remoteClusterAlias groupId");
    assertUsageError(run("remote-offsets", "x.properties", "A"), "remote-offsets: missing groupId");
    assertUsageError(run("hops", "x.properties"), "hops: missing sourceClusterAlias");
    assertUsageError(run("decode-checkpoints", "x.properties"), "decode-checkpoints: missing topic");
  }

  @Test
  void tooManyArguments() {
    assertUsageError(run("hops", "x.properties", "A", "B"), "hops: too many arguments: B");
    assertUsageError(run("upstream", "x.properties", "A"), "upstream: too many arguments: A");
    assertUsageError(run("translate", "x.properties", "A", "g", "100", "x"),
        "translate: too many arguments: x");
    assertUsageError(run("remote-topics", "x.properties", "A", "B"), "remote-topics: too many arguments: B");
  }

  @Test
  void badTimeouts() {
    assertUsageError(run("translate", "x.properties", "A", "g", "soon"),
        "translate: timeoutMs is not an integer: soon");
    assertUsageError(run("decode-heartbeats", "x.properties", "heartbeats", "0"),
        "decode-heartbeats: timeoutMs must be positive: 0");
    assertUsageError(run("remote-offsets", "x.properties", "A", "g", "-5"),
        "remote-offsets: timeoutMs must be positive: -5");
  }

  @Test
  void emptyArgument() {
    assertUsageError(run("hops", "x.properties", ""), "hops: empty argument 1");
  }

  @Test
  void parsesOptionalArguments() throws Exception {
    MirrorClientProbe.Invocation inv = MirrorClientProbe.parse(
        new String[] {"translate", "p.properties", "A", "g", "1500"});
    assertEquals(MirrorClientProbe.Command.TRANSLATE, inv.command());
    assertEquals(Path.of("p.properties"), inv.propertiesFile());
    assertEquals(List.of("A", "g"), inv.args());
    assertEquals(Duration.ofMillis(1500), inv.timeout());
    assertNull(inv.sourceAlias());

    inv = MirrorClientProbe.parse(new String[] {"decode-offset-syncs", "p.properties", "mm2-offset-syncs.B.internal"});
    assertEquals(Duration.ofMillis(MirrorClientProbe.DEFAULT_TIMEOUT_MS), inv.timeout());

    inv = MirrorClientProbe.parse(new String[] {"remote-topics", "p.properties", "A"});
    assertEquals(List.of(), inv.args());
    assertEquals("A", inv.sourceAlias());
  }

  @Test
  void unreadablePropertiesFile() {
    Result result = run("upstream", tmp.resolve("absent.properties").toString());
    assertEquals(1, result.rc());
    assertEquals("", result.out());
    assertTrue(result.err().startsWith(MirrorClientProbe.PREFIX + "java.nio.file.NoSuchFileException"),
        result.err());
  }

  @Test
  void missingBootstrapServersFailsBeforeAnyConnection() throws IOException {
    Result result = run("hops", props("replication.policy.separator=_\n").toString(), "A");
    assertEquals(1, result.rc());
    assertEquals("", result.out());
    assertTrue(result.err().startsWith(MirrorClientProbe.PREFIX + "org.apache.kafka.common.config.ConfigException"),
        result.err());
    assertTrue(result.err().contains("bootstrap.servers"), result.err());
  }

  // ---------------------------------------------------------------- properties and config

  @Test
  void loadsPropertiesAsUtf8() throws IOException {
    Map<String, Object> loaded = MirrorClientProbe.loadProperties(props(
        "# comment\nbootstrap.servers = 127.0.0.1:9092\nreplication.policy.separator=_\n"
            + "key\\ with\\:escapes=v\\u00e9\nsasl.jaas.config=caf\u00e9\n"));
    Map<String, Object> expected = new LinkedHashMap<>();
    expected.put("bootstrap.servers", "127.0.0.1:9092");
    expected.put("key with:escapes", "v\u00e9");
    expected.put("replication.policy.separator", "_");
    expected.put("sasl.jaas.config", "caf\u00e9");
    assertEquals(expected, loaded);
  }

  @Test
  void readerConfigKeepsOnlyConsumerSettings() {
    Map<String, Object> props = new LinkedHashMap<>();
    props.put("bootstrap.servers", "127.0.0.1:9092");
    props.put("security.protocol", "PLAINTEXT");
    props.put("replication.policy.separator", "_");
    props.put("group.id", "someone-elses-group");
    props.put("enable.auto.commit", "true");
    Map<String, Object> config = MirrorClientProbe.readerConfig(props);
    assertEquals("127.0.0.1:9092", config.get("bootstrap.servers"));
    assertEquals("PLAINTEXT", config.get("security.protocol"));
    assertFalse(config.containsKey("replication.policy.separator"));
    assertFalse(config.containsKey("group.id"));
    assertEquals("false", config.get("enable.auto.commit"));
    assertEquals("false", config.get("allow.auto.create.topics"));
    assertEquals("mirror-client-probe", config.get("client.id"));
  }

  // ---------------------------------------------------------------- decoding (bytes from mm2-internals.md)

  @Test
  void decodesCheckpoint() {
    ConsumerRecord<byte[], byte[]> rec = record("0001 67 0003 412e74 00000001",
        "0000 000000000000000a 0000000000000008 0000");
    assertEquals("{\"group\":\"g\",\"topic\":\"A.t\",\"partition\":1,\"upstreamOffset\":10,\"offset\":8,"
        + "\"metadata\":\"\"}", Json.write(MirrorClientProbe.checkpointJson(rec)));
  }

  @Test
  void decodesHeartbeat() {
    ConsumerRecord<byte[], byte[]> rec = record("0001 41 0001 42", "0000 0000018bcfe56800");
    assertEquals("{\"source\":\"A\",\"target\":\"B\",\"timestamp\":1700000000000}",
        Json.write(MirrorClientProbe.heartbeatJson(rec)));
  }

  @Test
  void decodesOffsetSync() {
    ConsumerRecord<byte[], byte[]> rec = record("0001 74 00000000", "0000000000000005 0000000000000007");
    assertEquals("{\"topic\":\"t\",\"partition\":0,\"upstreamOffset\":5,\"offset\":7}",
        Json.write(MirrorClientProbe.offsetSyncJson(rec)));
  }

  @Test
  void truncatedCheckpointIsRejected() {
    ConsumerRecord<byte[], byte[]> rec = record("0001 67 0003 412e74 00000001", "0000 000000000000000a");
    assertThrows(RuntimeException.class, () -> MirrorClientProbe.checkpointJson(rec));
  }

  @Test
  void offsetsAreSortedByTopicThenPartition() {
    Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
    offsets.put(new TopicPartition("b", 0), new OffsetAndMetadata(5, "m\"x"));
    offsets.put(new TopicPartition("a", 10), new OffsetAndMetadata(3));
    offsets.put(new TopicPartition("a", 2), new OffsetAndMetadata(4, null));
    assertEquals("{\"offsets\":[{\"topic\":\"a\",\"partition\":2,\"offset\":4,\"metadata\":\"\"},"
        + "{\"topic\":\"a\",\"partition\":10,\"offset\":3,\"metadata\":\"\"},"
        + "{\"topic\":\"b\",\"partition\":0,\"offset\":5,\"metadata\":\"m\\\"x\"}]}",
        Json.write(MirrorClientProbe.offsetsJson(offsets)));
  }
}
