package kmtest;

import org.apache.kafka.connect.mirror.IdentityReplicationPolicy;

/**
 * Kafka's IdentityReplicationPolicy under a name of its own, so that it is loaded as a policy
 * class of the user's own: topics keep their names, which carry no source alias.
 */
public class KeepNamePolicy extends IdentityReplicationPolicy {
}
