"""The Kafka source: a topic's records, decoded and enveloped, ingested exactly once."""
