package io.kafkamirror.probe;

import java.util.Collection;
import java.util.Map;

/**
 * A minimal JSON writer for the probe's output: {@code null}, strings, booleans, integral numbers,
 * maps (string keys, written in iteration order) and collections.
 *
 * <p>The output is pure ASCII: every character outside printable ASCII is written as a
 * {@code \\uXXXX} escape (UTF-16 code units, so supplementary characters become a surrogate
 * pair), which keeps it independent of the JVM's stdout encoding.
 */
final class Json {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private Json() {
    }

    /** The JSON text of {@code value}. */
    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value);
        return out.toString();
    }

    /** A JSON string literal (with the quotes) for {@code text}. */
    static String quote(String text) {
        StringBuilder out = new StringBuilder(text.length() + 2);
        quote(out, text);
        return out.toString();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String s) {
            quote(out, s);
        } else if (value instanceof Boolean b) {
            out.append(b.booleanValue());
        } else if (value instanceof Long || value instanceof Integer || value instanceof Short
                || value instanceof Byte) {
            out.append(((Number) value).longValue());
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                if (!(entry.getKey() instanceof String key)) {
                    throw new IllegalArgumentException("JSON object keys must be strings: " + entry.getKey());
                }
                if (!first) {
                    out.append(',');
                }
                first = false;
                quote(out, key);
                out.append(':');
                write(out, entry.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            out.append('[');
            boolean first = true;
            for (Object item : items) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                write(out, item);
            }
            out.append(']');
        } else {
            throw new IllegalArgumentException("cannot write " + value.getClass().getName() + " as JSON");
        }
    }

    private static void quote(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        out.append("\\u")
                            .append(HEX[(c >> 12) & 0xf])
                            .append(HEX[(c >> 8) & 0xf])
                            .append(HEX[(c >> 4) & 0xf])
                            .append(HEX[c & 0xf]);
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
