"""The JDBC sink's writer: one batch of typed blocks applied to the target, exactly once.

`JdbcWriter.apply(batch_id, blocks)` takes the blocks of one batch (any topics; Debezium envelopes
or flat records such as ExtractNewRecordState writes) and, per topic it writes (`wanted`):

1. keeps the events the configuration applies (creates, reads and updates; deletes and tombstones
   with `delete.enabled`; truncates with `truncate.enabled`) and reduces them to the last change
   per primary key (`sinks.changes`; with `primary.key.mode=none` nothing is reduced);
2. names the table (`table.name.format` with `${topic}`, `${source.db}`, `${source.schema}`,
   `${source.table}`, then Debezium's default strategy: dots become underscores) and its columns
   (the row image's fields after `field.include.list`/`field.exclude.list`, and the key's fields);
3. with `schema.evolution=basic` creates a missing table and adds missing columns (committed
   before the data: MySQL's DDL commits by itself); with `none` a missing table or column fails;
4. applies the changes in one transaction for the whole batch: a truncate first, then deletes by
   key and the rows (`insert.mode`: INSERT, UPDATE by key, or the dialect's upsert), in pages of
   `batch.size`; when every column's values can go as the target's bulk-load text, by a bulk load
   into a temporary staging table and one statement from it: into PostgreSQL COPY, then INSERT ...
   SELECT (ON CONFLICT), UPDATE ... FROM or DELETE ... USING; into MySQL and MariaDB `LOAD DATA
   LOCAL INFILE`, then INSERT ... SELECT (ON DUPLICATE KEY UPDATE), or UPDATE/DELETE joined on the
   key (a load that warns, as MySQL's does for a value that does not fit, is undone and the rows go
   as statements, which the database refuses); `bench/jdbc_sink.py` measures both; and
   records `(pipeline, batch id, topic)` in `headwater_sink_batches` in the same transaction. A
   topic the table already records for this batch is skipped, so a batch applied again (a Spark
   batch replayed after a crash) changes nothing.

A row the target refuses fails the batch: the transaction is rolled back (nothing of the batch is
applied) and `SinkError` names the table, the row's key and the database's message, found by
applying the refused page's rows one at a time under a savepoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import bool_array, bool_values, lit, valid_mask
from headwater.events.arrow import row_schema
from headwater.events.typed import TypedBlock
from headwater.sinks.changes import Changes, by_topic, reduce
from headwater.sinks.jdbc.config import JdbcSinkConfig
from headwater.sinks.jdbc.connection import (
    BulkLoadRefused,
    Connection,
    DatabaseError,
    MySqlConnection,
    PostgresConnection,
    connect,
)
from headwater.sinks.jdbc.dialects import (
    APPLIED_TABLE,
    Column,
    Dialect,
    MySqlDialect,
    PostgresDialect,
    dialect,
)
from headwater.sinks.jdbc.types import Binding, Cells, column_type, copy_text, load_text, python_values

UPSERT_OPS = ("c", "r", "u")
NOT_TABLE_RECORDS = ("TransactionMetadataValue", "Heartbeat", "SchemaChangeValue")  # value schemas' last names
SAVEPOINT = "headwater_page"


class SinkError(Exception):
    """The target refused a batch (the message names the table and the row's key), or the events
    cannot be written as configured."""


@dataclass
class Part:
    """The kept events of one block, split by what they do to the table."""

    block: TypedBlock
    image: pa.Array  # the row image (`after`, or the flat value) of every event
    image_schema: dict
    upserts: np.ndarray  # bool masks over the block's rows
    deletes: np.ndarray
    truncates: np.ndarray


@dataclass
class TablePlan:
    """One topic's changes in a batch and the table they go to."""

    topic: str
    table: str
    key: list[str]
    columns: dict[str, Column]
    parts: list[Part]
    changes: Changes

    @property
    def events(self) -> int:
        return len(self.changes)


class JdbcWriter:
    """Applies batches of typed blocks to one target (see the module's docstring)."""

    def __init__(self, cfg: JdbcSinkConfig, pipeline: str, conn: Connection | None = None):
        self.cfg = cfg
        self.pipeline = pipeline
        self.dialect: Dialect = dialect(cfg.target.dialect, cfg.quote_identifiers)
        self.conn = conn if conn is not None else connect(cfg)
        pg = self.dialect.name == "postgresql"
        self.binding = Binding(ZoneInfo(cfg.time_zone), zoned_as_local=not self.dialect.time_zone_types,
                               arrays_as_json=not pg, bits_as_text=pg, durations_as_text=pg)
        self.tables: dict[str, set[str]] = {}  # table -> its columns (as `_norm` writes them)
        self.applied_ready = False
        self.stages = 0  # staging tables made (their names are numbered)
        self.bulk_load = True  # False once the target refused the staging table or LOAD DATA LOCAL

    def close(self) -> None:
        self.conn.close()

    def apply(self, batch_id: int, blocks: Iterable[TypedBlock]) -> int:
        """Apply one batch (see the module's docstring); the number of events applied (0 when the
        batch was applied before)."""
        groups = {t: bs for t, bs in by_topic(blocks).items() if self.wanted(t, bs[0])}
        try:
            self._ensure_applied_table()
            pending = [t for t in groups if not self.conn.query(self.dialect.applied_select(),
                                                                [self.pipeline, batch_id, t])]
            plans = [p for p in (self.plan(t, groups[t]) for t in pending) if p is not None]
            for p in plans:
                self._evolve(p)
            self.conn.commit()
            applied = 0
            for t in pending:
                plan = next((p for p in plans if p.topic == t), None)
                events = plan.events if plan is not None else 0
                self.conn.execute(self.dialect.applied_insert(), [self.pipeline, batch_id, t, events])
                if plan is not None:
                    self._write(plan)
                    applied += events
            self.conn.commit()
            return applied
        except BaseException:
            self.conn.rollback()
            self.tables.clear()  # what the DDL made may be rolled back with it
            raise

    def wanted(self, topic: str, block: TypedBlock) -> bool:
        """Whether a topic is written: chosen by `topics`/`topics.regex`, and never the records of
        transaction metadata, heartbeats or schema changes (which a Kafka Connect sink must not
        subscribe to)."""
        name = str((block.value_schema or {}).get("name") or "")
        if name.rpartition(".")[2] in NOT_TABLE_RECORDS:
            return False
        if self.cfg.topics:
            return topic in self.cfg.topics
        if self.cfg.topics_regex is not None:
            return re.fullmatch(self.cfg.topics_regex, topic) is not None
        return True

    # planning
    def plan(self, topic: str, blocks: Sequence[TypedBlock]) -> TablePlan | None:
        """What the events of one topic do to its table; None when nothing applies."""
        kept = [b for b in (self._applicable(b) for b in blocks) if b is not None]
        if not kept:
            return None
        key_fields = self._key_fields(topic, kept[0])
        keys = [self._key_array(b, key_fields) for b in kept]
        changes = reduce(kept, keys)
        table = self.table_name(topic, blocks)
        columns: dict[str, Column] = {}
        key_schemas = self._key_schemas(kept[0], key_fields)
        for name in key_fields:
            columns[name] = Column(name, column_type(key_schemas[name]), nullable=False)
        parts = []
        for b in changes.blocks:
            part = self._part(b)
            for f in part.image_schema.get("fields", []):
                if f["field"] not in columns and self._included(topic, f["field"]):
                    columns[f["field"]] = Column(f["field"], column_type(f), nullable=bool(f.get("optional", False)),
                                                 default=f.get("default"))
            parts.append(part)
        return TablePlan(topic, table, key_fields, columns, parts, changes)

    def _applicable(self, block: TypedBlock) -> TypedBlock | None:
        """The events of a block the configuration applies."""
        op = block.batch.column("op")
        valid = valid_mask(block.batch.column("value"))
        _, envelope = row_schema(block.value_schema or {})
        keep = valid.copy() if not envelope else _ops(op, UPSERT_OPS)
        if envelope:
            if self.cfg.delete_enabled:
                keep |= _ops(op, ("d",)) | ~valid
            if self.cfg.truncate_enabled:
                keep |= _ops(op, ("t",))
        else:
            deleted = _flat_deleted(block) & valid
            keep &= ~deleted
            if self.cfg.delete_enabled:
                keep |= deleted | ~valid
        if keep.all():
            return block
        return TypedBlock(block.batch.filter(bool_array(keep))) if keep.any() else None

    def _key_fields(self, topic: str, block: TypedBlock) -> list[str]:
        mode, fields = self.cfg.primary_key_mode, list(self.cfg.primary_key_fields)
        if mode == "none":
            return []
        if mode == "record_key":
            schema = block.key_schema
            if schema is None:
                raise SinkError(f"topic {topic}: the events have no key (a table without a primary key), "
                                "which primary.key.mode=record_key needs")
            if schema.get("type") != "struct":
                if len(fields) != 1:
                    raise SinkError(f"topic {topic}: the key is a {schema.get('type')}, not a struct: name its "
                                    "column with primary.key.fields")
                return fields
            names = [f["field"] for f in schema["fields"]]
        else:  # record_value
            image, _ = row_schema(block.value_schema or {})
            names = [f["field"] for f in image.get("fields", [])]
        missing = [f for f in fields if f not in names]
        if missing:
            raise SinkError(f"topic {topic}: primary.key.fields names {', '.join(missing)}, which the "
                            f"{'key' if mode == 'record_key' else 'value'} does not have ({', '.join(names)})")
        return fields or names

    def _key_schemas(self, block: TypedBlock, key_fields: list[str]) -> dict[str, dict]:
        if self.cfg.primary_key_mode == "record_key":
            schema = block.key_schema or {}
            if schema.get("type") != "struct":
                return {key_fields[0]: schema}
        else:
            schema, _ = row_schema(block.value_schema or {})
        return {f["field"]: f for f in schema.get("fields", []) if f["field"] in key_fields}

    def _key_array(self, block: TypedBlock, key_fields: list[str]) -> pa.Array:
        """The primary key of each event of a block, for the reduction."""
        b = block.batch
        if not key_fields:
            return pa.nulls(b.num_rows)
        if self.cfg.primary_key_mode == "record_key":
            key = b.column("key")
            if not pa.types.is_struct(key.type):
                return key
        else:
            key = self._part(block).image
        children = [key.field(f) for f in key_fields]
        return pa.StructArray.from_arrays(children, names=key_fields, mask=pc.invert(key.is_valid()))

    def _part(self, block: TypedBlock) -> Part:
        b = block.batch
        value = b.column("value")
        image_schema, envelope = row_schema(block.value_schema or {})
        valid = valid_mask(value)
        op = b.column("op")
        if envelope:
            image = value.field("after")
            upserts, deletes, truncates = _ops(op, UPSERT_OPS), _ops(op, ("d",)) | ~valid, _ops(op, ("t",))
        else:
            image = value
            deleted = _flat_deleted(block) & valid
            upserts, deletes, truncates = valid & ~deleted, deleted | ~valid, np.zeros(b.num_rows, dtype=bool)
        return Part(block, image, image_schema, upserts, deletes, truncates)

    def _included(self, topic: str, name: str) -> bool:
        include, exclude = self.cfg.field_include, self.cfg.field_exclude
        if include:
            return name in include or f"{topic}:{name}" in include
        return not (name in exclude or f"{topic}:{name}" in exclude)

    def table_name(self, topic: str, blocks: Sequence[TypedBlock]) -> str:
        """The table of a topic: `table.name.format` filled in, dots replaced by underscores."""
        source = _source_names(topic, blocks)
        name = self.cfg.table_name_format.replace("${topic}", topic)
        for k in ("db", "schema", "table"):
            name = name.replace(f"${{source.{k}}}", source.get(k) or "")
        return name.replace(".", "_")

    # DDL
    def _norm(self, name: str) -> str:
        return name if self.dialect.quote_identifiers and self.dialect.name != "mysql" else name.lower()

    def _evolve(self, plan: TablePlan) -> None:
        present = self.tables.get(plan.table)
        if present is None or any(self._norm(c) not in present for c in plan.columns):
            present = {self._norm(c) for c in self.conn.columns(self.dialect.fold(plan.table))}
        basic = self.cfg.schema_evolution == "basic"
        if not present:
            if not basic:
                raise SinkError(f"table {plan.table} does not exist: create it, or set schema.evolution: basic")
            self.conn.execute(self.dialect.create_table(plan.table, list(plan.columns.values()), plan.key))
            present = {self._norm(c) for c in plan.columns}
        missing = [c for c in plan.columns.values() if self._norm(c.name) not in present]
        if missing and not basic:
            raise SinkError(f"table {plan.table} has no column {', '.join(c.name for c in missing)}: add them, or "
                            "set schema.evolution: basic")
        for c in missing:
            if c.name in plan.key:
                raise SinkError(f"table {plan.table}: its primary key has no column {c.name}, and "
                                "schema.evolution never changes a primary key")
            self.conn.execute(self.dialect.add_column(plan.table, Column(c.name, c.type, True, c.default)))
            present.add(self._norm(c.name))
        self.tables[plan.table] = present

    def _ensure_applied_table(self) -> None:
        if self.applied_ready:
            return
        if not self.conn.columns(self.dialect.fold(APPLIED_TABLE)):
            try:
                self.conn.execute(self.dialect.applied_table())
                self.conn.commit()
            except DatabaseError:  # another task made it meanwhile
                self.conn.rollback()
                if not self.conn.columns(self.dialect.fold(APPLIED_TABLE)):
                    raise
        self.applied_ready = True

    # DML
    def _write(self, plan: TablePlan) -> None:
        d, table, key = self.dialect, plan.table, plan.key
        for part in plan.parts:
            if part.truncates.any():
                self.conn.execute(d.truncate(table))
        mode = self.cfg.insert_mode
        for part in plan.parts:
            if part.deletes.any():
                keys = self._key_columns(part, part.deletes, key)
                self._run(plan, "delete", keys, keys)
            if part.upserts.any():
                keys = self._key_columns(part, part.upserts, key)
                self._run(plan, mode, keys + self._value_columns(plan, part), keys)

    def _key_columns(self, part: Part, mask: np.ndarray, key: list[str]) -> list[Cells]:
        """The key's columns of the events of a part that `mask` selects."""
        if not key:
            return []
        sel = bool_array(mask)
        if self.cfg.primary_key_mode == "record_key":
            k = part.block.batch.column("key").filter(sel)
            schemas = self._key_schemas(part.block, key)
            if not pa.types.is_struct(k.type):
                return [(key[0], k, schemas[key[0]])]
            return [(n, k.field(n), schemas[n]) for n in key]
        image = part.image.filter(sel)
        fields = {f["field"]: f for f in part.image_schema.get("fields", [])}
        return [(n, image.field(n), fields[n]) for n in key]

    def _value_columns(self, plan: TablePlan, part: Part) -> list[Cells]:
        """The row image's columns of a part's upserts (the key's left out: they come from the key)."""
        image = part.image.filter(bool_array(part.upserts))
        return [(f["field"], image.field(i), f) for i, f in enumerate(part.image_schema.get("fields", []))
                if f["field"] not in plan.key and f["field"] in plan.columns]

    def _python_rows(self, columns: list[Cells], n: int) -> list[tuple]:
        if not columns:
            return [()] * n
        return list(zip(*(python_values(a, s, self.binding) for _, a, s in columns), strict=True))

    def _run(self, plan: TablePlan, kind: str, columns: list[Cells], keys: list[Cells]) -> None:
        """Apply rows (`kind`: insert, update, upsert or delete by key) under a savepoint: through a
        staging table filled by the target's bulk load (`_staged`) where every column's values can
        go as its text, else as statements in pages of `batch.size`. A refused page or load is
        applied again a row at a time to name the row the database refuses."""
        d, table, key = self.dialect, plan.table, plan.key
        names = [n for n, _, _ in columns]
        if kind == "delete":
            sql = d.delete(table, key)
        elif kind == "update":
            sql = d.update(table, names, key)
            names = [n for n in names if n not in key] + key  # the order the statement binds them
            columns = [next(c for c in columns if c[0] == n) for n in names]
        elif kind == "upsert":
            sql = d.upsert(table, names, key)
        else:
            sql = d.insert(table, names)
        n = len(columns[0][1]) if columns else 0
        text = self._stage_text(columns)
        if text is not None:
            self.conn.execute(f"SAVEPOINT {SAVEPOINT}")
            try:
                if self._staged(plan, kind, names, text):
                    return
                self.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")  # the load warned: statements judge
            except DatabaseError as exc:
                self.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
                raise self._refused(plan, sql, self._python_rows(columns, n), self._python_rows(keys, n),
                                    exc) from None
        rows = self._python_rows(columns, n)
        for start in range(0, n, self.cfg.batch_size):
            stop = min(n, start + self.cfg.batch_size)
            self.conn.execute(f"SAVEPOINT {SAVEPOINT}")
            try:
                self.conn.many(sql, rows[start:stop])
            except DatabaseError as exc:
                self.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
                raise self._refused(plan, sql, rows[start:stop], self._python_rows(keys, n)[start:stop],
                                    exc) from None

    def _stage_text(self, columns: list[Cells]) -> tuple[bytes, list[bool]] | None:
        """The rows as the text the target's bulk load reads (COPY, LOAD DATA), or None when the
        target has none here (or refused it before) or a value cannot go that way."""
        if not self.bulk_load:
            return None
        if isinstance(self.dialect, PostgresDialect) and isinstance(self.conn, PostgresConnection):
            text = copy_text(columns)
            return None if text is None else (text, [])
        if isinstance(self.dialect, MySqlDialect) and isinstance(self.conn, MySqlConnection):
            return load_text(columns, self.binding)
        return None

    def _staged(self, plan: TablePlan, kind: str, names: list[str], text: tuple[bytes, list[bool]]) -> bool:
        """Bulk-load the rows into a temporary table shaped as the target's columns (COPY into
        PostgreSQL, LOAD DATA into MySQL), then apply them with one statement; False (nothing
        applied) when MySQL's load warned that a value did not fit, which its statements refuse, or
        when the target refused the temporary table (no privilege for one; MySQL's GTID
        consistency) or LOAD DATA LOCAL (then no later rows try it)."""
        d, conn = self.dialect, self.conn
        assert isinstance(d, (PostgresDialect, MySqlDialect))
        self.stages += 1
        stage = f"headwater_stage_{self.stages}"
        cols = [d.ident(n) for n in names]
        try:
            conn.execute(d.create_stage(stage, plan.table, names))
        except DatabaseError:
            self.bulk_load = False
            return False
        if isinstance(d, PostgresDialect) and isinstance(conn, PostgresConnection):
            conn.copy(stage, cols, text[0])
            conn.execute(d.from_stage(kind, plan.table, stage, names, plan.key))
            return True
        assert isinstance(d, MySqlDialect) and isinstance(conn, MySqlConnection)
        try:
            try:
                warned = conn.load(stage, cols, *text)
            except BulkLoadRefused:
                self.bulk_load = False
                return False
            if warned:
                return False
            conn.execute(d.from_stage(kind, plan.table, stage, names, plan.key))
            return True
        finally:
            conn.execute(d.drop_stage(stage))

    def _refused(self, plan: TablePlan, sql: str, rows: list, keys: list, page_error: DatabaseError) -> SinkError:
        for row, key in zip(rows, keys, strict=True):
            self.conn.execute(f"SAVEPOINT {SAVEPOINT}")
            try:
                self.conn.execute(sql, row)
            except DatabaseError as exc:
                self.conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
                return SinkError(f"table {plan.table}: the database refused the row with key "
                                 f"{_key_text(plan.key, key)}: {exc}")
        return SinkError(f"table {plan.table}: the database refused the batch: {page_error}")


def _key_text(names: list[str], values: tuple) -> str:
    if not names:
        return "(none: the table has no primary key)"
    return "{" + ", ".join(f"{n}={v!r}" for n, v in zip(names, values, strict=True)) + "}"


def _ops(op: pa.Array, ops: tuple[str, ...]) -> np.ndarray:
    """Which events' `op` is one of `ops`."""
    found = pc.is_in(op, value_set=pa.array(ops, pa.string()))
    return bool_values(pc.fill_null(found, lit(False)))


def _flat_deleted(block: TypedBlock) -> np.ndarray:
    """Which flat records are deletes rewritten by ExtractNewRecordState (`__deleted` = "true")."""
    value = block.batch.column("value")
    if not pa.types.is_struct(value.type) or value.type.get_field_index("__deleted") < 0:
        return np.zeros(len(value), dtype=bool)
    flag = value.field("__deleted")
    text = flag.cast(pa.string()) if not pa.types.is_string(flag.type) else flag
    return bool_values(pc.fill_null(pc.equal(text, lit("true")), lit(False)))


def _source_names(topic: str, blocks: Sequence[TypedBlock]) -> dict[str, str | None]:
    """The source's database, schema and table of a topic's events (from an envelope's `source`,
    else from the topic's last two parts)."""
    for b in blocks:
        value = b.batch.column("value")
        if pa.types.is_struct(value.type) and value.type.get_field_index("source") >= 0:
            source = value.field("source")
            valid = source.is_valid()
            names = {}
            for k in ("db", "schema", "table"):
                if source.type.get_field_index(k) >= 0:
                    v = pc.drop_null(source.field(k).filter(valid))
                    names[k] = v[0].as_py() if len(v) else None
            if names.get("table"):
                return names
    parts = topic.split(".")
    return {"db": parts[-2] if len(parts) > 1 else None, "schema": parts[-2] if len(parts) > 1 else None,
            "table": parts[-1]}
