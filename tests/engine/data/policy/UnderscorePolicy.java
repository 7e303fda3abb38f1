package kmtest;

import java.util.Map;

import org.apache.kafka.common.Configurable;
import org.apache.kafka.connect.mirror.ReplicationPolicy;

/**
 * A replication policy of a user's own, for tests: {@code <prefix><alias>__<topic>}, where the
 * prefix comes from {@code replication.policy.topic.prefix} (empty when not set), read in
 * {@link #configure}. Its heartbeats topic is {@code <prefix>heartbeats}; the other internal topic
 * names are ReplicationPolicy's defaults.
 */
public class UnderscorePolicy implements ReplicationPolicy, Configurable {
    public static final String PREFIX_CONFIG = "replication.policy.topic.prefix";
    private static final String SEPARATOR = "__";

    private String prefix = "";

    @Override
    public void configure(Map<String, ?> configs) {
        Object value = configs.get(PREFIX_CONFIG);
        if (value != null) {
            prefix = value.toString();
        }
        if (prefix.contains(SEPARATOR)) {
            throw new IllegalArgumentException(PREFIX_CONFIG + " must not contain " + SEPARATOR);
        }
    }

    @Override
    public String formatRemoteTopic(String sourceClusterAlias, String topic) {
        return prefix + sourceClusterAlias + SEPARATOR + topic;
    }

    @Override
    public String heartbeatsTopic() {
        return prefix + "heartbeats";
    }

    private int split(String topic) {
        if (!topic.startsWith(prefix)) {
            return -1;
        }
        int at = topic.indexOf(SEPARATOR, prefix.length());
        return at > prefix.length() ? at : -1;
    }

    @Override
    public String topicSource(String topic) {
        int at = split(topic);
        return at < 0 ? null : topic.substring(prefix.length(), at);
    }

    @Override
    public String upstreamTopic(String topic) {
        int at = split(topic);
        return at < 0 ? null : topic.substring(at + SEPARATOR.length());
    }
}
