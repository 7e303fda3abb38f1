package io.kafkamirror;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.kafka.common.Uuid;
import org.junit.jupiter.api.Test;

class TopicIdsTest {

  @Test
  void idsAreWrittenAsLibrdkafkaWritesThem() {
    // str(confluent_kafka.Uuid(msb, lsb)) for these bits: the standard base64 alphabet, where
    // Kafka's Uuid.toString() has '_' for '/' (and '-' for '+')
    Uuid id = new Uuid(0x49ea74167f71fed0L, 0x6f5edffb22540b32L);
    assertEquals("Sep0Fn9x/tBvXt/7IlQLMg", TopicIds.text(id));
    assertEquals("Sep0Fn9x_tBvXt_7IlQLMg", id.toString());
    assertEquals("CcHKsrTrQVGNrg4Pta5HZA",
        TopicIds.text(new Uuid(703065885734814033L, -8237631207778662556L)));
  }
}
