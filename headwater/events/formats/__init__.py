"""Serializations of typed event blocks (`events.typed`), each a function of the blocks: JSON as Kafka's
JsonConverter writes it (`formats.json`), Avro as Confluent's AvroConverter (`formats.avro`), CloudEvents
as Debezium's CloudEventsConverter (`formats.cloudevents`); `formats.converters` picks them by Kafka
Connect's `key.converter`/`value.converter`."""
