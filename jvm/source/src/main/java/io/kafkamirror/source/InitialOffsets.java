package io.kafkamirror.source;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.function.Supplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Where a query's source started, kept in its checkpoint ({@code sources/0/0}) as Spark's Kafka
 * source keeps it (a zero byte, {@code v1}, the offsets): a query restarted before its first
 * batch committed re-runs that batch from the same offsets, not from "earliest" or "latest"
 * resolved again, and kafka-mirror reads it as the first batch's start.
 */
final class InitialOffsets {
  private static final String VERSION = "v1";

  private final Path file;
  private final Configuration conf;

  InitialOffsets(String metadataPath, Configuration conf) {
    this.file = new Path(metadataPath, "0");
    this.conf = conf;
  }

  PartitionOffsets getOrCreate(Supplier<PartitionOffsets> resolve) {
    try {
      FileSystem fs = file.getFileSystem(conf);
      if (fs.exists(file)) {
        return read(fs);
      }
      PartitionOffsets offsets = resolve.get();
      fs.mkdirs(file.getParent());
      Path temp = new Path(file.getParent(), "." + file.getName() + ".tmp");
      try (FSDataOutputStream out = fs.create(temp, true)) {
        out.write(0);
        out.write((VERSION + "\n" + offsets.json()).getBytes(StandardCharsets.UTF_8));
        out.hsync();
      }
      if (!fs.rename(temp, file)) {
        throw new IOException("could not rename " + temp + " to " + file);
      }
      return offsets;
    } catch (IOException e) {
      throw new UncheckedIOException("initial offsets " + file, e);
    }
  }

  private PartitionOffsets read(FileSystem fs) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (InputStream in = fs.open(file)) {
      in.transferTo(bytes);
    }
    String text = bytes.toString(StandardCharsets.UTF_8).replace("\0", "");
    int newline = text.indexOf('\n');
    if (!text.startsWith(VERSION + "\n") || newline < 0) {
      throw new IllegalStateException("Log file was malformed: " + file + " holds " + text);
    }
    return PartitionOffsets.parse(text.substring(newline + 1));
  }
}
