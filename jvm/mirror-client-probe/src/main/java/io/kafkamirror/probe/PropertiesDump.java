package io.kafkamirror.probe;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * Prints, as one JSON object, every key and value of a properties file exactly as
 * {@code java.util.Properties.load(InputStream)} reads it (ISO-8859-1), which is how Kafka's
 * {@code Utils.loadProps} (and so MirrorMaker 2) reads mm2.properties. Tests compare
 * kafka-mirror's reader with this.
 */
public final class PropertiesDump {
    private PropertiesDump() {
    }

    public static void main(String[] argv) throws IOException {
        if (argv.length != 1) {
            System.err.println("usage: PropertiesDump <file.properties>");
            System.exit(1);
        }
        Properties properties = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(argv[0]))) {
            properties.load(in);
        }
        Map<String, Object> sorted = new TreeMap<>();
        for (String name : properties.stringPropertyNames()) {
            sorted.put(name, properties.getProperty(name));
        }
        System.out.println(Json.write(sorted));
    }
}
