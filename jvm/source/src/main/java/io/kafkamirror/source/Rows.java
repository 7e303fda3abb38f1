package io.kafkamirror.source;

import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/** Kafka records as rows of the schema Spark's Kafka source reads with {@code includeHeaders}. */
final class Rows {
  static final StructType HEADER = new StructType(new StructField[] {
      DataTypes.createStructField("key", DataTypes.StringType, true),
      DataTypes.createStructField("value", DataTypes.BinaryType, true)});
  static final StructType SCHEMA = new StructType(new StructField[] {
      DataTypes.createStructField("key", DataTypes.BinaryType, true),
      DataTypes.createStructField("value", DataTypes.BinaryType, true),
      DataTypes.createStructField("topic", DataTypes.StringType, true),
      DataTypes.createStructField("partition", DataTypes.IntegerType, true),
      DataTypes.createStructField("offset", DataTypes.LongType, true),
      DataTypes.createStructField("timestamp", DataTypes.TimestampType, true),
      DataTypes.createStructField("timestampType", DataTypes.IntegerType, true),
      DataTypes.createStructField("headers", new ArrayType(HEADER, true), true)});

  private final UnsafeProjection unsafe = UnsafeProjection.create(SCHEMA);

  InternalRow row(ConsumerRecord<byte[], byte[]> record) {
    Object headers = null;
    if (record.headers().iterator().hasNext()) {
      List<Object> list = new ArrayList<>();
      for (Header header : record.headers()) {
        list.add(new GenericInternalRow(
            new Object[] {UTF8String.fromString(header.key()), header.value()}));
      }
      headers = new GenericArrayData(list.toArray());
    }
    return unsafe.apply(new GenericInternalRow(new Object[] {
        record.key(),
        record.value(),
        UTF8String.fromString(record.topic()),
        record.partition(),
        record.offset(),
        DateTimeUtils.fromJavaTimestamp(new Timestamp(record.timestamp())),
        record.timestampType().id,
        headers}));
  }
}
