"""Post processors (`post.processors`), and the one Debezium documents: the reselect post processor.

A connector's `post.processors` lists aliases; `<alias>.type` names the class
(`io.debezium.processors.reselect.ReselectColumnsPostProcessor`, or `ReselectColumnsPostProcessor`)
and `<alias>.<option>` its options. Post processors run on each batch before the transformations.

`ReselectColumns` re-reads from the source table the columns of `after` whose value the log did not
carry: the unavailable-value placeholder of an unchanged TOASTed value (`reselect.unavailable.values`,
default true; the placeholder as the connector writes it for the column's type) and nulls
(`reselect.null.values`, default true), for the columns `reselect.columns.include.list` selects (or
`reselect.columns.exclude.list` does not; regexes matched case-insensitively against
`<schema>.<table>:<column>`; all columns without either). The rows are found by the table's primary
key (its unique key when it has none) with the values of `after`, or by the event key's fields with
`reselect.use.event.key`. Snapshot reads (`op` r), tombstones, deletes and the signaling table's
events are left alone. One query per block and table reads every row it needs
(`WHERE (key) IN (VALUES ...)`), and the values are converted as the connector converts a snapshot's
(Debezium converts them with its JDBC value converters). A row no longer there, or a failing query,
is logged and the event left as it is (`reselect.error.handling.mode=warn`, the default), or fails
the batch (`fail`). PostgreSQL only: other connectors refuse the post processor by name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import Property, parse_value, prop
from headwater.events.arrays import valid_mask
from headwater.events.formats.json import JsonOptions, json_values
from headwater.events.typed import TypedBlock, TypedEvents, connect_type
from headwater.transforms.base import TransformError, suggest
from headwater.transforms.blocks import rebuild

log = logging.getLogger(__name__)

CLASS_NAMES = ("io.debezium.processors.reselect.ReselectColumnsPostProcessor", "ReselectColumnsPostProcessor")
OPTIONS = (
    prop("reselect.columns.include.list", "list"),
    prop("reselect.columns.exclude.list", "list"),
    prop("reselect.unavailable.values", "boolean", True),
    prop("reselect.null.values", "boolean", True),
    prop("reselect.use.event.key", "boolean", False),
    prop("reselect.error.handling.mode", "enum", "warn", ("warn", "fail")),
)
LIST = Property("post.processors", "list")


def split_post_processors(props: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The connector's other properties, and the post processors' (`post.processors` and the keys of the
    aliases it lists)."""
    aliases, _ = parse_value(LIST, props.get(LIST.name))
    prefixes = tuple(f"{a}." for a in aliases or [])
    own: dict[str, Any] = {}
    post: dict[str, Any] = {}
    for k, v in props.items():
        (post if k == LIST.name or (prefixes and str(k).startswith(prefixes)) else own)[str(k)] = v
    return own, post


@dataclass
class ReselectColumns:
    """The reselect post processor of one alias (see the module's docstring)."""

    alias: str
    values: dict[str, Any]
    connector: Any  # the ConnectorConfig the connection and the type settings come from
    _tables: dict[str, Any] = field(default_factory=dict)
    _conn: Any = None

    def __getstate__(self) -> dict[str, Any]:  # executors open their own connection
        return {**self.__dict__, "_conn": None, "_tables": {}}

    @property
    def selector(self) -> re.Pattern[str] | None:
        include = self.values["reselect.columns.include.list"]
        exclude = self.values["reselect.columns.exclude.list"]
        patterns = include or exclude
        if not patterns:
            return None
        return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)

    def selected(self, table: str, column: str) -> bool:
        selector = self.selector
        if selector is None:
            return True
        hit = selector.fullmatch(f"{table}:{column}") is not None
        return hit if self.values["reselect.columns.include.list"] else not hit

    def connection(self) -> Any:
        from headwater.connectors.postgres.connection import ConnectionParams, connect

        if self._conn is None or self._conn.closed:
            self._conn = connect(ConnectionParams.from_config(self.connector))
        return self._conn

    def table(self, qualified: str) -> Any:
        from headwater.connectors.postgres.catalog import read_table

        if qualified not in self._tables:
            schema, name = qualified.split(".", 1)
            self._tables[qualified] = read_table(self.connection(), schema, name)
        return self._tables[qualified]

    def apply(self, block: TypedBlock) -> TypedBlock:
        schema = block.value_schema
        if schema is None or not str(schema.get("name") or "").endswith(".Envelope"):
            return block
        value = block.batch.column("value")
        op = block.batch.column("op").to_numpy(zero_copy_only=False)
        names = [f["field"] for f in schema["fields"]]
        if "after" not in names or "source" not in names:
            return block
        after = value.field(names.index("after"))
        eligible = valid_mask(value) & valid_mask(after) & (op != "r")
        if not eligible.any():
            return block
        source = value.field(names.index("source"))
        source_schema = schema["fields"][names.index("source")]
        source_names = [f["field"] for f in source_schema["fields"]]
        if "table" not in source_names or "schema" not in source_names:
            return block
        tables = pc.binary_join_element_wise(source.field(source_names.index("schema")),
                                             source.field(source_names.index("table")), ".")
        signal = str(self.connector.get("signal.data.collection") or "")
        new_after = after
        after_schema = schema["fields"][names.index("after")]
        for qualified in pc.unique(tables.filter(pa.array(eligible))).to_pylist():
            if qualified is None or qualified == signal or qualified.split(".", 1)[-1] == signal:
                continue
            rows = eligible & np.asarray(pc.fill_null(pc.equal(tables, qualified), False).to_numpy(zero_copy_only=False))
            new_after = self._table(block, qualified, rows, new_after, after_schema)
        if new_after is after:
            return block
        children = [new_after if n == "after" else value.field(i) for i, n in enumerate(names)]
        mask = None if value.null_count == 0 else pc.invert(value.is_valid())
        return rebuild(block, value=(schema, pa.StructArray.from_arrays(children, names=names, mask=mask)))

    def _table(self, block: TypedBlock, qualified: str, rows: np.ndarray, after: pa.Array, after_schema: dict
               ) -> pa.Array:
        """`after` with the columns of `qualified`'s rows (`rows`) that need it re-read."""
        from headwater.connectors.postgres.types import TypeSettings, build_converter

        try:
            table = self.table(qualified)
        except KeyError:
            log.warning("Unable to locate table %s in relational model.", qualified)
            return after
        settings = TypeSettings.from_config(self.connector)
        fields = after_schema["fields"]
        wanted: dict[int, np.ndarray] = {}
        for j, f in enumerate(fields):
            if not self.selected(qualified, f["field"]) or f["field"] not in table.column_names():
                continue
            column = after.field(j)
            need = np.zeros(len(column), dtype=bool)
            if self.values["reselect.null.values"]:
                need |= ~valid_mask(column)
            if self.values["reselect.unavailable.values"]:
                converter = build_converter(table.column(f["field"]), settings, qualified)
                if converter is not None and converter.toast_placeholder is not None:
                    typ, fn = connect_type({k: v for k, v in f.items() if k != "field"})
                    placeholder = pa.array([fn(converter.toast_placeholder)], typ)[0]
                    need |= _equal(column, placeholder)
            need &= rows
            if need.any():
                wanted[j] = need
        if not wanted:
            return after
        keys = self._keys(block, table, after, after_schema)
        if keys is None:
            return after
        key_names, key_values = keys
        todo = np.flatnonzero(np.logical_or.reduce(list(wanted.values())))
        columns = [fields[j]["field"] for j in wanted]
        found = self._select(table, key_names, [key_values[i] for i in todo], columns)
        if found is None:
            return after
        children = [after.field(j) for j in range(len(fields))]
        missing = [key_values[i] for i in todo if key_values[i] not in found]
        for k in missing:
            self._problem(f"Failed to find row in table {qualified} with key {dict(zip(key_names, k, strict=True))}.")
        for j, need in wanted.items():
            f = fields[j]
            converter = build_converter(table.column(f["field"]), settings, qualified)
            assert converter is not None
            at = [i for i in np.flatnonzero(need) if key_values[i] in found]
            if not at:
                continue
            texts = [found[key_values[i]][columns.index(f["field"])] for i in at]
            typ, fn = connect_type({k: v for k, v in f.items() if k != "field"})
            new = pa.array([None if t is None else fn(converter.from_text(t)) for t in texts], typ)
            picks = np.arange(len(after), dtype=np.int64)
            picks[at] = len(after) + np.arange(len(at))
            children[j] = pa.concat_arrays([children[j], new]).take(pa.array(picks))
        valid = valid_mask(after)
        return pa.StructArray.from_arrays(children, names=[f["field"] for f in fields],
                                          mask=None if valid.all() else pa.array(~valid))

    def _keys(self, block: TypedBlock, table: Any, after: pa.Array, after_schema: dict
              ) -> tuple[list[str], list[tuple]] | None:
        """The key columns and, per event, the key values (JSON form, as a tuple) to find its row by."""
        options = JsonOptions(replace_null_with_default=False)
        if self.values["reselect.use.event.key"]:
            key_schema = block.key_schema
            if key_schema is None or key_schema.get("type") != "struct":
                log.debug("Key is not a Struct, no re-selection possible.")
                return None
            names = [f["field"] for f in key_schema["fields"]]
            rows = json_values(block.batch.column("key"), key_schema, options)
        else:
            names = list(table.key_columns)
            rows = json_values(after, after_schema, options)
        if not names:
            log.debug("No key columns for %s, no re-selection possible.", table.id)
            return None
        return names, [tuple(None if r is None else r.get(n) for n in names) for r in rows]

    def _select(self, table: Any, key_names: list[str], keys: list[tuple], columns: list[str]
                ) -> dict[tuple, tuple] | None:
        """Rows of `table` by key: key (JSON form) -> the columns' text values; None on an SQL error."""
        from headwater.connectors.postgres.types import TypeSettings, build_converter

        unique = list(dict.fromkeys(keys))
        key_types = [table.column(k).type_name for k in key_names]
        quoted = ", ".join(_quote(c) for c in key_names)
        values = ", ".join("(" + ", ".join(f"%s::{t}" for t in key_types) + ")" for _ in unique)
        selected = ", ".join([*(f"{_quote(k)}::text" for k in key_names), *(f"{_quote(c)}::text" for c in columns)])
        sql = (f"SELECT {selected} FROM {_quote(table.schema)}.{_quote(table.name)} "
               f"WHERE ({quoted}) IN (VALUES {values})")
        params = [_sql_param(v) for k in unique for v in k]
        try:
            conn = self.connection()
            with conn.cursor() as cur:
                cur.execute(sql, params)
                fetched = cur.fetchall()
        except Exception as exc:
            self._problem(f"Failed to re-select columns for table {table.id}: {exc}")
            return None
        settings = TypeSettings.from_config(self.connector)
        converters = [build_converter(table.column(k), settings, table.id) for k in key_names]
        out: dict[tuple, tuple] = {}
        for row in fetched:
            key = tuple(None if t is None else c.from_text(t) if c is not None else t
                        for t, c in zip(row[:len(key_names)], converters, strict=True))
            out.setdefault(key, tuple(row[len(key_names):]))  # several rows (no key): the first wins
        return out

    def _problem(self, message: str) -> None:
        if self.values["reselect.error.handling.mode"] == "fail":
            raise TransformError(message)
        log.warning(message)


@dataclass
class PostProcessors:
    """The post processors of a connector, in the order `post.processors` lists them."""

    processors: list[ReselectColumns]

    def apply(self, events: TypedEvents) -> TypedEvents:
        blocks = list(events.blocks)
        for p in self.processors:
            blocks = [p.apply(b) for b in blocks]
        return TypedEvents(blocks)


def post_processors(config: Any) -> PostProcessors | None:
    """The post processors of a validated ConnectorConfig (their properties are kept among its `extra`)."""
    _, props = split_post_processors(config.extra)
    return parse_post_processors(props, config.connector, config)


def parse_post_processors(props: Mapping[str, Any], connector: str | None = None, config: Any = None
                          ) -> PostProcessors | None:
    """The post processors `props` (from `split_post_processors`) configure, None without any;
    ConfigErrors naming every bad property. `connector` is the connector's short name (the reselect
    post processor needs `postgres`), `config` its ConnectorConfig (for the connection)."""
    errors: list[ConfigError] = []
    aliases, err = parse_value(LIST, props.get(LIST.name))
    if err is not None:
        raise ConfigErrors([err])
    out = []
    known = {p.name: p for p in OPTIONS}
    for alias in aliases or []:
        prefix = f"{alias}."
        given = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
        kind = given.pop("type", None)
        if kind is None:
            errors.append(ConfigError(prefix + "type", "is required", f"set {prefix}type: {CLASS_NAMES[0]}"))
            continue
        if str(kind).strip() not in CLASS_NAMES:
            errors.append(ConfigError(prefix + "type", f"unknown post processor {kind!r}",
                                      f"the post processor headwater has is {CLASS_NAMES[0]}"))
            continue
        values: dict[str, Any] = {}
        for name, raw in given.items():
            definition = known.get(name)
            if definition is None:
                errors.append(ConfigError(prefix + name, "not an option of ReselectColumnsPostProcessor",
                                          suggest(name, known, prefix)))
                continue
            value, e = parse_value(Property(prefix + name, definition.type, definition.default, definition.allowed), raw)
            if e is not None:
                errors.append(e)
            values[name] = value
        for p in OPTIONS:
            values.setdefault(p.name, parse_value(p, p.default)[0] if p.default is not None else None)
        if values["reselect.columns.include.list"] and values["reselect.columns.exclude.list"]:
            errors.append(ConfigError(prefix + "reselect.columns.exclude.list", "cannot be given with the include list",
                                      "keep one of the two lists"))
        for option in ("reselect.columns.include.list", "reselect.columns.exclude.list"):
            for pattern in values[option] or []:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    errors.append(ConfigError(prefix + option, f"{pattern!r} is not a valid regex: {exc}",
                                              "give <schema>.<table>:<column> regexes"))
        if connector is not None and connector != "postgres":
            errors.append(ConfigError(prefix + "type", "re-selects from PostgreSQL only",
                                      "remove post.processors for this connector"))
        out.append(ReselectColumns(alias, values, config))
    if errors:
        raise ConfigErrors(errors)
    return PostProcessors(out) if out else None


def _equal(column: pa.Array, scalar: pa.Scalar) -> np.ndarray:
    """Where `column` equals `scalar` (nested values compared as Python data)."""
    if pa.types.is_nested(column.type):
        target = scalar.as_py()
        return np.array([v == target for v in column.to_pylist()], dtype=bool)
    return np.asarray(pc.fill_null(pc.equal(column, scalar), False).to_numpy(zero_copy_only=False), dtype=bool)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_param(value: Any) -> Any:
    """A key value (JSON form) as the text the `%s::<type>` cast reads."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None else str(value)
