package io.kafkamirror.source;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/**
 * Makes the reader of each group; refuses a retried task. On a Spark cluster a task whose
 * executor was lost (or that failed) is run again from the batch's start, and the attempt before
 * it may have written part of the batch to the target already: the retry would write those
 * records a second time. Refused, the retries fail the batch's job, the query stops, and the
 * mirror restarts it from what the target holds (its exactly-once restart skips what the cut
 * batch wrote). Local mode never retries a task.
 */
public final class GroupReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    refuseRetry(TaskContext.get());
    return new GroupReader((GroupInputPartition) partition);
  }

  /** Throws when {@code task} is not the first attempt of its task (or its stage). */
  static void refuseRetry(TaskContext task) {
    if (task == null || (task.attemptNumber() == 0 && task.stageAttemptNumber() == 0)) {
      return;
    }
    throw new IllegalStateException(
        "kafka-mirror refuses a retried task (stage " + task.stageId() + " attempt "
            + task.stageAttemptNumber() + ", partition " + task.partitionId() + " attempt "
            + task.attemptNumber() + "): an earlier attempt may have written part of the batch "
            + "to the target, which a retry would write again; the mirror restarts the query "
            + "from what the target holds");
  }
}
