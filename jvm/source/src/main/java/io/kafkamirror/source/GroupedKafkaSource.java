package io.kafkamirror.source;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.readStream.format("kafka-mirror")}: Kafka partitions read in groups, one consumer
 * and one task per group ({@link GroupedKafkaStream}), with the rows, options and offsets of
 * Spark's own Kafka source.
 */
public final class GroupedKafkaSource implements TableProvider, DataSourceRegister {
  public static final String NAME = "kafka-mirror";

  @Override
  public String shortName() {
    return NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Rows.SCHEMA;
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new SourceTable();
  }

  private static final class SourceTable implements Table, SupportsRead {
    @Override
    public String name() {
      return NAME;
    }

    @Override
    public StructType schema() {
      return Rows.SCHEMA;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      SourceOptions parsed = SourceOptions.from(options);
      return () -> new Scan() {
        @Override
        public StructType readSchema() {
          return Rows.SCHEMA;
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
          return new GroupedKafkaStream(parsed, new InitialOffsets(checkpointLocation,
              SparkContext.getOrCreate().hadoopConfiguration()));
        }

        @Override
        public String description() {
          return "kafka-mirror groups";
        }
      };
    }
  }
}
