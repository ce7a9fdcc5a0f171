"""Change events: Kafka Connect schemas, Debezium's envelope, and their JSON serialization."""
