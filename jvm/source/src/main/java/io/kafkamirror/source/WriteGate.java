package io.kafkamirror.source;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * One flow's lease as the source's readers in this JVM see it: open until a time on the
 * monotonic clock ({@link System#nanoTime()}, which the mirror's Python process reads as {@code
 * time.monotonic_ns()} on the same host), closed otherwise. The mirror opens it after every
 * renewal of the flow's lease, until the renewal is too old to write on ({@code 0.8 x
 * mirror.lease.ms}), and closes it when the lease is lost.
 *
 * <p>A reader hands no record to Spark while its flow's gate is closed. So a writer paused past
 * its lease (SIGSTOP, a long GC pause, the Python process stalled) reads nothing more once it
 * runs again: its deadline has passed, and nobody opens the gate of a lease another instance
 * took. What its producer had already accepted before the pause can still reach the target.
 *
 * <p>A gate exists once named: a reader created before the mirror opened it waits. Executors in
 * other JVMs (a Spark cluster) are not given the option, so they have no gate.
 */
public final class WriteGate {
  private static final ConcurrentHashMap<String, WriteGate> GATES = new ConcurrentHashMap<>();
  private static final long WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

  private volatile long until;
  private volatile boolean open;

  private WriteGate() {}

  /** The gate named {@code key} (null: none), created closed when new. */
  static WriteGate of(String key) {
    return key == null || key.isEmpty() ? null : GATES.computeIfAbsent(key, k -> new WriteGate());
  }

  /** Opens the gate {@code key} until {@code nanos} on {@link System#nanoTime()}'s clock. */
  public static void openUntil(String key, long nanos) {
    WriteGate gate = of(key);
    gate.until = nanos;
    gate.open = true;
  }

  /** Closes the gate {@code key}: its readers wait until it is opened again. */
  public static void close(String key) {
    of(key).open = false;
  }

  /** This JVM's monotonic clock, for the caller to check that it reads the same one. */
  public static long nanoTime() {
    return System.nanoTime();
  }

  /** Whether a record may be handed on now. */
  boolean isOpen() {
    return open && System.nanoTime() - until < 0;
  }

  /**
   * Waits until the gate is open or {@code deadlineMillis} (wall clock) passed; true when open.
   * An interrupt (a stop of the query) ends the wait with an exception.
   */
  boolean await(long deadlineMillis) {
    while (!isOpen()) {
      if (System.currentTimeMillis() >= deadlineMillis) {
        return false;
      }
      LockSupport.parkNanos(WAIT_NANOS);
      if (Thread.currentThread().isInterrupted()) {
        throw new IllegalStateException(
            "interrupted while waiting for the flow's lease (this instance does not hold it)");
      }
    }
    return true;
  }
}
