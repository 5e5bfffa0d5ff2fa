"""A replicated cluster in Kafka's ZooKeeper mode: membership and metadata in ZooKeeper, the elected
controller, replica roles, follower fetching and acks=all. The broker uses it through
``BrokerContext.cluster`` (a ``ClusterMember``); see docs/ARCHITECTURE.md."""
