package io.kafkamirror.source;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class OpenReadersTest {

  @Test
  void countsTheReadersOfEachRunUntilTheyClose() {
    OpenReaders.opened("run-a");
    OpenReaders.opened("run-a");
    OpenReaders.opened("run-b");
    assertEquals(2, OpenReaders.open("run-a"));
    assertEquals(1, OpenReaders.open("run-b"));
    OpenReaders.closed("run-a");
    assertEquals(1, OpenReaders.open("run-a"));
    OpenReaders.closed("run-a");
    OpenReaders.closed("run-b");
    assertEquals(0, OpenReaders.open("run-a"));
    assertEquals(0, OpenReaders.open("run-b"));
  }

  @Test
  void aRunNeverOpenedOrUnnamedCountsNothing() {
    OpenReaders.opened(null);
    OpenReaders.closed(null);
    OpenReaders.closed("run-never-opened");
    assertEquals(0, OpenReaders.open("run-never-opened"));
  }
}
