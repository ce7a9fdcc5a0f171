"""The outbox event router: `io.debezium.transforms.outbox.EventRouter` (Debezium 3.x semantics).

Each insert into an outbox table becomes one message: topic from the `route.by.field` column through
`route.topic.regex`/`route.topic.replacement` (Java regex and replacement syntax), key the
`table.field.event.key` column, value the `table.field.event.payload` column (or, with any `envelope`
placement in `table.fields.additional.placement`, a struct of `payload` and those columns, named
`<value schema namespace>.<route-by value>.Value` and versioned by `table.field.event.schema.version`),
header `id` the `table.field.event.id` column, plus `header` placements; a `partition` placement sets
the Kafka partition (the `__partition` header of `partitions.PARTITION_HEADER`). Deletes are dropped,
updates dropped after `table.op.invalid.behavior` (`warn`, `error`: logged; `fatal`: the event fails),
tombstones dropped, records that are not change envelopes (heartbeats, transaction metadata) passed on
unchanged. `table.expand.json.payload` parses a string payload starting with `{` as JSON and infers its
Connect schema as Debezium's JsonSchemaData does (`table.json.payload.null.behavior`: a null field is
left out, `ignore`, or kept as optional bytes); what does not parse is kept as it is, and a payload
that parses to a top-level array fails the event (it fails Debezium's engine too).
`route.tombstone.on.empty.payload` turns a null or blank payload into a tombstone.

Like Debezium, one instance names the envelope schema after the route-by value of the first event
with that payload schema (or that schema version) and keeps the name for the schemas it has seen.
`table.field.event.timestamp` is checked (the column must exist and be a Timestamp, MicroTimestamp
or NanoTimestamp) but headwater's events carry no Kafka record timestamp to set; the `tracing.*`
options are accepted and do nothing, as in a Debezium without OpenTelemetry on its class path.

Column-wise: rows are selected, routed and keyed on whole Arrow columns; only JSON expansion parses
payloads one by one.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.properties import prop
from headwater.events.arrays import valid_mask
from headwater.events.typed import TypedBlock, connect_type
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import add_header, rebuild, struct_array, struct_schema, take, value_field
from headwater.transforms.jsonschema import Unexpandable, conform, infer, parse
from headwater.transforms.partitions import PARTITION_HEADER, PARTITION_SCHEMA
from headwater.transforms.regex import check_replacement, java_regex, java_replacement
from headwater.transforms.registry import register

log = logging.getLogger(__name__)

PLACEMENTS = ("header", "envelope", "partition")
TIMESTAMPS = ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp",
              "io.debezium.time.MicroTimestamp", "io.debezium.time.NanoTimestamp")
_INVALID = ("warn", "error", "fatal")


@register
class EventRouter(Transform):
    """The outbox pattern (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.outbox.EventRouter",)
    SHORT_NAME = "EventRouter"
    OPTIONS = (
        prop("table.op.invalid.behavior", "enum", "warn", _INVALID),
        prop("debezium.op.invalid.behavior", "enum", None, _INVALID,
             doc="the older name of table.op.invalid.behavior"),
        prop("table.field.event.id", default="id"),
        prop("table.field.event.key", default="aggregateid"),
        prop("table.field.event.type", default="type"),
        prop("table.field.event.timestamp"),
        prop("table.field.event.payload", default="payload"),
        prop("table.field.event.schema.version"),
        prop("table.expand.json.payload", "boolean", False),
        prop("table.json.payload.null.behavior", "enum", "ignore", ("ignore", "optional_bytes")),
        prop("table.fields.additional.placement", "list"),
        prop("table.fields.additional.error.on.missing", "boolean", True),
        prop("route.by.field", default="aggregatetype"),
        prop("route.topic.regex", default="(?<routedByValue>.*)"),
        prop("route.topic.replacement", default="outbox.event.${routedByValue}"),
        prop("route.tombstone.on.empty.payload", "boolean", False),
        prop("tracing.span.context.field", default="tracingspancontext"),
        prop("tracing.operation.name", default="debezium-read"),
        prop("tracing.with.context.field.only", "boolean", False),
    )

    def configure(self) -> None:
        v = self.values
        self.invalid = v["debezium.op.invalid.behavior"] or v["table.op.invalid.behavior"]
        self.additional: list[tuple[str, str, str]] = []  # (column, placement, alias)
        for item in v["table.fields.additional.placement"] or []:
            parts = item.split(":")
            if len(parts) not in (2, 3) or not parts[0] or parts[1].strip().lower() not in PLACEMENTS:
                self.fail("table.fields.additional.placement", f"{item!r} is not column:placement[:alias]",
                          "give a list such as type:header:eventType,kind:envelope; placement is header, "
                          "envelope or partition")
            self.additional.append((parts[0], parts[1].strip().lower(), parts[2] if len(parts) == 3 else parts[0]))
        self.regex = java_regex(self, "route.topic.regex", v["route.topic.regex"])
        check_replacement(self, "route.topic.replacement", v["route.topic.replacement"], self.regex)
        self.envelope = any(p == "envelope" for _, p, _ in self.additional)
        self._schemas: dict[Any, dict] = {}  # payload schema or schema version -> envelope schema

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        value = block.batch.column("value")
        keep = valid_mask(value)  # tombstones are dropped
        schema = block.value_schema
        if not keep.any():
            return []
        if schema is None or not str(schema.get("name") or "").endswith(".Envelope"):
            return [take(block, keep)]  # heartbeats, transaction metadata, schema changes pass
        op = block.batch.column("op").to_numpy(zero_copy_only=False)
        updates = keep & (op == "u")
        if updates.any():
            self._invalid(block, updates)
        keep &= (op != "d") & (op != "u")
        if not keep.any():
            return []
        return self._route(take(block, keep))

    def _invalid(self, block: TypedBlock, rows: np.ndarray) -> None:
        message = f"Unexpected update message received on {block.topic} and ignored"
        if self.invalid == "fatal":
            raise TransformError(message.replace("and ignored", "(table.op.invalid.behavior=fatal)"))
        (log.error if self.invalid == "error" else log.warning)("%s (%d events)", message, int(rows.sum()))

    def _column(self, block: TypedBlock, name: str, what: str) -> tuple[pa.Array, dict]:
        found = value_field(block, "after." + name)
        if found is None:
            raise TransformError(f"Unable to find {what} field {name} in event")
        return found

    def _route(self, block: TypedBlock) -> list[TypedBlock]:
        v = self.values
        after = block.batch.column("value").field("after")
        if after.null_count:
            raise TransformError("Read Outbox Event: the event has no 'after' row")
        payload, payload_schema = self._column(block, v["table.field.event.payload"], "payload")
        event_id, id_schema = self._column(block, v["table.field.event.id"], "event-id")
        if v["table.field.event.timestamp"]:
            _, ts_schema = self._column(block, v["table.field.event.timestamp"], "timestamp")
            if ts_schema.get("name") not in TIMESTAMPS:
                raise TransformError(f"Unsupported field type {ts_schema.get('name') or ts_schema['type']} "
                                     "for event timestamp")
        key = self._column(block, v["table.field.event.key"], "event key")
        routed, _ = self._column(block, v["route.by.field"], "route-by")
        if routed.null_count:
            raise TransformError(f"the route-by column {v['route.by.field']} is null")
        extra = {(c, p): self._column(block, c, "additional") for c, p, _ in self.additional}
        version = None
        if v["table.field.event.schema.version"]:
            version = self._column(block, v["table.field.event.schema.version"], "schema version")[0]

        block = add_header(block, "id", id_schema, event_id)
        for column, placement, alias in self.additional:
            if placement == "header":
                values, schema = extra[(column, placement)]
                block = add_header(block, alias, schema, values)
            elif placement == "partition":
                block = add_header(block, PARTITION_HEADER, PARTITION_SCHEMA,
                                   extra[(column, placement)][0].cast(pa.int32()))

        n = len(block)
        payloads: list[tuple[dict | None, Any]] = [(payload_schema, None)] * n
        schema_codes = np.zeros(n, dtype=np.int64)
        if v["table.expand.json.payload"]:
            payloads = self._expanded(payload, payload_schema)
            seen: dict[bytes, int] = {}
            schema_codes = np.array([seen.setdefault(orjson.dumps(s), len(seen)) for s, _ in payloads], dtype=np.int64)
        blank = self._blank(payload, payloads) if v["route.tombstone.on.empty.payload"] else np.zeros(n, bool)
        topic_codes, topic_names = self._topics(routed)
        version_codes = np.zeros(n, dtype=np.int64)
        if version is not None:
            version_codes = np.asarray(pc.dictionary_encode(version).indices.fill_null(-1), dtype=np.int64) + 1
        # one output block per (topic, payload schema, schema version, tombstone or not): the variants
        # taken in order of their first event, so that the envelope schema names are those Debezium gives
        variant = ((topic_codes * (schema_codes.max() + 1) + schema_codes) * (version_codes.max() + 1)
                   + version_codes) * 2 + blank
        _, first, inverse = np.unique(variant, return_index=True, return_inverse=True)
        out = []
        for g in np.argsort(first, kind="stable"):
            rows = np.flatnonzero(inverse == g)
            i = int(rows[0])
            value_schema = payloads[i][0]
            if self.envelope:  # named (and cached) before the tombstone check, as Debezium does
                value_schema = self._envelope_schema(block, value_schema, routed[i].as_py(),
                                                     None if version is None else version[i].as_py())
            if blank[i]:
                value_schema = None
            idx = pa.array(rows, pa.int64())
            column = self._value_column(value_schema, payload.take(idx), [payloads[r] for r in rows],
                                        {k: c.take(idx) for k, (c, _) in extra.items()})
            out.append(rebuild(take(block, idx), topic=topic_names[topic_codes[i]], key=(key[1], key[0].take(idx)),
                               value=(value_schema, column)))
        return out

    def _topics(self, routed: pa.Array) -> tuple[np.ndarray, list[str]]:
        """Each event's topic, as a code into the list of distinct topics."""
        replacement = self.values["route.topic.replacement"]
        dictionary = pc.dictionary_encode(routed)
        names = []
        for name in dictionary.dictionary.to_pylist():
            m = self.regex.fullmatch(name)
            names.append(java_replacement(replacement, m) if m else name)
        return np.asarray(dictionary.indices, dtype=np.int64), names

    def _blank(self, payload: pa.Array, payloads: list[tuple[dict | None, Any]]) -> np.ndarray:
        """Where the payload is null or, as text, blank (Java's `toString().trim().isEmpty()`)."""
        blank = ~valid_mask(payload)
        if pa.types.is_string(payload.type):
            trimmed = pc.utf8_length(pc.utf8_trim(payload, characters=_JAVA_SPACE))
            empty = np.asarray(pc.fill_null(pc.equal(trimmed, 0), False).to_numpy(zero_copy_only=False), dtype=bool)
            expanded = np.array([e is not None for _, e in payloads], dtype=bool)
            blank |= empty & ~expanded
        return blank

    def _envelope_schema(self, block: TypedBlock, payload_schema: dict | None, routed: str, version: Any) -> dict:
        cache = ("version", version) if version is not None else ("payload", orjson.dumps(payload_schema))
        hit = self._schemas.get(cache)
        if hit is None:
            after = value_field(block, "after")
            assert after is not None
            original = after[1].get("name")
            if original is None:
                name = routed
            elif "." in original:
                head, tail = original.rsplit(".", 1)
                name = f"{head}.{routed}.{tail}"
            else:
                name = f"{routed}.{original}"
            fields: list[tuple[str, dict]] = [("payload", payload_schema or {})]
            for column, placement, alias in self.additional:
                if placement == "envelope":
                    found = value_field(block, "after." + column)
                    assert found is not None
                    fields.append((alias, found[1]))
            hit = self._schemas[cache] = struct_schema(fields, name=name, version=version)
        return hit

    def _value_column(self, schema: dict | None, payload: pa.Array, payloads: list[tuple[dict | None, Any]],
                      extra: dict[tuple[str, str], pa.Array]) -> pa.Array:
        n = len(payload)
        if schema is None:
            return pa.nulls(n)
        expanded = any(e is not None for _, e in payloads)
        if not self.envelope:
            if not expanded:
                return payload
            typ, fn = connect_type(schema)
            return pa.array([None if e is None else fn(e) for _, e in payloads], type=typ)
        payload_schema = schema["fields"][0]
        if expanded:
            typ, fn = connect_type(payload_schema)
            payload = pa.array([None if e is None else fn(e) for _, e in payloads], type=typ)
        fields = [("payload", payload)]
        fields += [(alias, extra[(column, placement)]) for column, placement, alias in self.additional
                   if placement == "envelope"]
        return struct_array(fields, length=n)

    def _expanded(self, payload: pa.Array, schema: dict) -> list[tuple[dict | None, Any]]:
        """Per row, the payload's schema and its parsed value (None: kept as it is)."""
        out: list[tuple[dict | None, Any]] = []
        null_bytes = self.values["table.json.payload.null.behavior"] == "optional_bytes"
        field = self.values["table.field.event.payload"]
        for text in payload.to_pylist():
            if not isinstance(text, str):
                out.append((schema, None))
                continue
            try:
                if not text.startswith("{"):
                    if text.startswith("["):
                        raise TransformError("the JSON payload is an array: Debezium cannot expand it into a struct")
                    raise Unexpandable(text[:1])
                node = parse(text)
                inferred = infer(field, node, null_bytes)
                out.append((inferred, conform(node, inferred)))
            except Unexpandable:
                log.debug("JSON expansion failed for payload %.40r", text)
                out.append((schema, None))
        return out


_JAVA_SPACE = "".join(chr(c) for c in range(0x21))  # what Java's String.trim removes
