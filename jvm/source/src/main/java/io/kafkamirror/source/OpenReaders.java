package io.kafkamirror.source;

import java.util.concurrent.ConcurrentHashMap;

/**
 * The readers open in this JVM per query run (the source's {@code run} option; runs without it
 * are not counted). A reader is closed when its task ends, after the task's writer sent its last
 * record: a count of 0 says no task of the run can send anything more. Stopping a query does not
 * wait for that (Spark cancels the query's job and its tasks are interrupted later, by the
 * scheduler's own thread), so the driver waits for it before it reads what the target holds and
 * starts the next run there.
 */
public final class OpenReaders {
  private static final ConcurrentHashMap<String, Integer> OPEN = new ConcurrentHashMap<>();

  private OpenReaders() {}

  static void opened(String run) {
    if (run != null) {
      OPEN.merge(run, 1, Integer::sum);
    }
  }

  static void closed(String run) {
    if (run != null) {
      OPEN.computeIfPresent(run, (r, count) -> count > 1 ? count - 1 : null);
    }
  }

  /** Readers of {@code run} open in this JVM. */
  public static int open(String run) {
    return OPEN.getOrDefault(run, 0);
  }
}
