"""Serializations of typed event blocks (`events.typed`): JSON as Kafka's JsonConverter writes it
(`formats.json`); Avro and CloudEvents are to come beside it, each a function of the blocks."""
