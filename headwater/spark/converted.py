"""The lines of the `headwater-jsonl` sink when its key or value converter is not the source's JSON.

The source then hands typed blocks (`headwater.output=blocks`) and the sink's option
`headwater.converters` names the two converters (`events.formats.converters`). Each line is
`{"topic", "key", "value"[, "headers"]}` as always: a converter writing JSON text (JsonConverter,
CloudEvents JSON) puts its JSON there as it is, a converter writing bytes (Avro, CloudEvents Avro:
Confluent's wire format) the base64 text of the bytes, as a JSON string; `null` for no key, a
tombstone, or a value the converter writes nothing for (CloudEvents of a non-change event). Headers
hold keys as JSON, as the key converter writes them when it writes JSON, else as JsonConverter
without schemas. The lines of a task's events are written in the order the source made them.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import lit, string_array
from headwater.events.formats.converters import JSON, Converters
from headwater.events.formats.json import JsonOptions, header_texts
from headwater.events.headers import headers_json_members
from headwater.events.typed import TypedBlock


def _texts(written: Sequence[str | bytes | None]) -> list[str]:
    """JSON text as it is, bytes as a JSON string of their base64, None as null."""
    return ["null" if v is None else v if isinstance(v, str) else '"' + base64.b64encode(v).decode() + '"'
            for v in written]


def converted_lines(blocks: Sequence[TypedBlock], converters: Converters) -> pa.Array:
    """The jsonl lines of the events of `blocks`, in the order of their `_order`."""
    key_spec = converters.key_spec
    header_options = key_spec.json_options() if key_spec.kind == JSON else JsonOptions()
    orders, topics, keys, values, extras = [], [], [], [], []
    for block in blocks:
        n = len(block)
        orders.append(block.batch.column("_order"))
        topics.append(string_array([json_string(block.topic)] * n))
        keys.append(string_array(_texts(converters.keys(block))))
        values.append(string_array(_texts(converters.values(block))))
        extras.append(headers_json_members(header_texts(block, header_options)))
    if not orders:
        return pa.array([], pa.string())
    table = pa.table({"o": pa.concat_arrays(orders), "t": pa.concat_arrays(topics), "k": pa.concat_arrays(keys),
                      "v": pa.concat_arrays(values), "h": pa.concat_arrays(extras)})
    table = table.take(pc.sort_indices(table, [("o", "ascending")]))
    parts = [lit('{"topic":'), table.column("t"), lit(',"key":'), table.column("k"), lit(',"value":'),
             table.column("v"), table.column("h"), lit("}\n"), lit("")]
    return pc.binary_join_element_wise(*parts).combine_chunks()


def json_string(text: str) -> str:
    """A string as JSON text."""
    return orjson.dumps(text).decode()
