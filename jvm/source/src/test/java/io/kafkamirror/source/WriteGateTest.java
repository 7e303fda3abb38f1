package io.kafkamirror.source;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class WriteGateTest {
  private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

  @Test
  void aGateNamedBeforeItIsOpenedIsClosed() {
    WriteGate gate = WriteGate.of("new-flow");
    assertFalse(gate.isOpen());
    assertFalse(gate.await(System.currentTimeMillis() + 30));
  }

  @Test
  void noNameNoGate() {
    assertNull(WriteGate.of(null));
    assertNull(WriteGate.of(""));
  }

  @Test
  void openUntilItsDeadlineThenClosed() {
    WriteGate gate = WriteGate.of("deadline");
    WriteGate.openUntil("deadline", System.nanoTime() + SECOND);
    assertTrue(gate.isOpen());
    assertTrue(gate.await(System.currentTimeMillis()));
    WriteGate.openUntil("deadline", System.nanoTime() - 1);  // a renewal too old to write on
    assertFalse(gate.isOpen());
  }

  @Test
  void closedWhenTheLeaseIsLostUntilItIsTakenAgain() {
    WriteGate gate = WriteGate.of("lost");
    WriteGate.openUntil("lost", System.nanoTime() + SECOND);
    WriteGate.close("lost");
    assertFalse(gate.isOpen());
    WriteGate.openUntil("lost", System.nanoTime() + SECOND);
    assertTrue(gate.isOpen());
    assertSame(gate, WriteGate.of("lost"));  // one gate per name, whoever asks
  }

  @Test
  void aWaitingReaderGoesOnOnceTheGateOpens() throws InterruptedException {
    WriteGate gate = WriteGate.of("opens");
    AtomicBoolean passed = new AtomicBoolean();
    Thread reader = new Thread(() -> passed.set(gate.await(Long.MAX_VALUE)));
    reader.start();
    Thread.sleep(50);
    assertFalse(passed.get());
    WriteGate.openUntil("opens", System.nanoTime() + SECOND);
    reader.join(5_000);
    assertTrue(passed.get());
    assertSame(gate, WriteGate.of("opens"));
  }

  @Test
  void anInterruptEndsTheWait() throws InterruptedException {
    WriteGate gate = WriteGate.of("interrupted");
    AtomicBoolean failed = new AtomicBoolean();
    Thread reader = new Thread(() -> {
      try {
        gate.await(Long.MAX_VALUE);
      } catch (IllegalStateException e) {
        failed.set(true);
      }
    });
    reader.start();
    Thread.sleep(50);
    reader.interrupt();
    reader.join(5_000);
    assertTrue(failed.get());
    assertThrows(IllegalStateException.class, () -> {
      Thread.currentThread().interrupt();
      try {
        gate.await(Long.MAX_VALUE);
      } finally {
        Thread.interrupted();
      }
    });
  }
}
