package io.kafkamirror.probe;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

class JsonTest {

  @Test
  void quotesPlainText() {
    assertEquals("\"\"", Json.quote(""));
    assertEquals("\"group-1.A_b~\"", Json.quote("group-1.A_b~"));
  }

  @Test
  void escapesQuotesBackslashesAndShortForms() {
    assertEquals("\"a\\\"b\\\\c/d\"", Json.quote("a\"b\\c/d"));
    assertEquals("\"\\b\\f\\n\\r\\t\"", Json.quote("\b\f\n\r\t"));
  }

  @Test
  void escapesOtherControlCharacters() {
    assertEquals("\"\\u0000\\u0001\\u001f\\u007f\"", Json.quote("\u0000\u0001\u001f\u007f"));
  }

  @Test
  void writesNonAsciiAsUnicodeEscapes() {
    assertEquals("\"\\u00fc\\u20ac\"", Json.quote("\u00fc\u20ac"));
    // U+1F600 is the surrogate pair D83D DE00
    assertEquals("\"x\\ud83d\\ude00\"", Json.quote("x\uD83D\uDE00"));
    assertEquals("\"\\u2028\"", Json.quote("\u2028"));
  }

  @Test
  void writesNestedValues() {
    Map<String, Object> inner = new LinkedHashMap<>();
    inner.put("topic", "A.t");
    inner.put("partition", 3);
    inner.put("offset", Long.MAX_VALUE);
    inner.put("negative", -1L);
    inner.put("short", (short) 7);
    inner.put("metadata", null);
    inner.put("flag", true);
    Map<String, Object> outer = new LinkedHashMap<>();
    outer.put("offsets", List.of(inner, List.of()));
    outer.put("empty", Map.of());
    assertEquals(
        "{\"offsets\":[{\"topic\":\"A.t\",\"partition\":3,\"offset\":9223372036854775807,"
            + "\"negative\":-1,\"short\":7,\"metadata\":null,\"flag\":true},[]],\"empty\":{}}",
        Json.write(outer));
  }

  @Test
  void writesListsWithNulls() {
    assertEquals("[null,\"a\",1]", Json.write(new ArrayList<>(Arrays.asList(null, "a", 1))));
  }

  @Test
  void escapesKeys() {
    assertEquals("{\"k\\\"\\n\":\"v\"}", Json.write(Map.of("k\"\n", "v")));
  }

  @Test
  void rejectsUnsupportedValues() {
    assertThrows(IllegalArgumentException.class, () -> Json.write(1.5));
    assertThrows(IllegalArgumentException.class, () -> Json.write(new Object()));
    Map<Object, Object> badKey = new LinkedHashMap<>();
    badKey.put(1, "x");
    assertThrows(IllegalArgumentException.class, () -> Json.write(badKey));
  }
}
