"""The Kafka sink: a collection's changes as JSON records, one Kafka transaction per interval."""
