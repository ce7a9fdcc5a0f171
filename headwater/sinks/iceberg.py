"""The `iceberg` sink: an Apache Iceberg table per captured table, written with pyiceberg.

The catalog is a SQL catalog (`catalog.uri` a SQLAlchemy URL: SQLite by default, at
`<catalog.warehouse>/catalog.db`; a PostgreSQL URL such as `postgresql+psycopg2://...` lets several
writers share it) or a REST catalog (an `http://` or `https://` URL). A table's identifier is its
`table.name.format` (default `${topic}`): what comes before the last dot is its namespace (created
when missing; pyiceberg's catalogs take one level, so dots in it become `_`, as does any character
other than letters, digits and `_`), so `dbserver1.public.customers` is table `customers` in
namespace `dbserver1_public`; a name without a dot is in namespace `default`.

In `merge` mode (the default) a micro-batch is reduced to the last change of each key
(`sinks.changes`, `sinks.lake`) and applied copy-on-write in one Iceberg transaction: the rows in
the range of the first key column that the batch touches are deleted (pyiceberg rewrites the data
files that hold them; it writes no equality deletes), and the upserted rows appended with the rows
of that range whose key the batch does not touch; a truncate in the batch deletes every row first.
A column whose value is PostgreSQL's unchanged TOAST (`__debezium_unavailable_value`, the value older
than the batch: `sinks.lake`) takes the value of the row it replaces (a new key's row, from a
primary-key change, gets the placeholder).
In `changelog` mode every change is appended: the row image plus `_op`, `_change_type`,
`_commit_version`, `_commit_timestamp`, `_source_ts_ms`, `_batch_id` and `_batch_order` (the order of
the changes; a truncate is a row with `_op` `t`); unchanged TOAST is written as the placeholder.
A table is created by its first batch, in the same commit, partitioned (identity) by the
`partition.by` columns it has; columns the source adds are added (`union_by_name`), and a column
the source drops stays, null in the rows written after the drop.

Exactly once: each snapshot the sink commits carries `headwater.app-id` and `headwater.batch-id` in
its summary; before writing, the sink walks back from the table's current snapshot to the last one
of its application id, and skips a batch whose id is not beyond it: a replayed batch changes nothing.

Types: the row image's Arrow types (`events.arrow`) as Iceberg has them: 8- and 16-bit integers as
`int`, timestamps and times in microseconds (a ZonedTimestamp as `timestamptz`), a column without a
type as text; UUIDs and JSON stay text, as the events hold them.

`expire_snapshots` drops the old snapshots the micro-batches leave, for every table of the catalog.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.table import Table, Transaction

from headwater.events.arrays import int64_array
from headwater.events.typed import TypedBlock
from headwater.sinks.lake import (
    DataFile,
    TopicChanges,
    batch_changes,
    cast_types,
    fill_column,
    safe_name,
    table_name,
)
from headwater.sinks.lake_config import MODES, IcebergOptions

DEFAULT_NAMESPACE = "default"
APP_ID = "headwater.app-id"
BATCH_ID = "headwater.batch-id"


def iceberg_type(t: pa.DataType) -> pa.DataType:
    """The type Iceberg holds for a row image's (scalar) Arrow type."""
    if pa.types.is_int8(t) or pa.types.is_int16(t):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_null(t):
        return pa.string()
    return t


def open_catalog(options: IcebergOptions) -> Catalog:
    """The catalog the options name (see the module's docstring)."""
    warehouse = options.warehouse
    if "://" not in warehouse:
        Path(warehouse).mkdir(parents=True, exist_ok=True)
        warehouse = Path(warehouse).resolve().as_uri()
    uri = options.catalog_uri or f"sqlite:///{Path(options.warehouse).resolve() / 'catalog.db'}"
    kind = "rest" if uri.startswith(("http://", "https://")) else "sql"
    props: dict[str, Any] = {"type": kind, "uri": uri, "warehouse": warehouse, **options.catalog_properties}
    if kind == "sql":
        props.setdefault("init_catalog_tables", "true")
    return load_catalog(options.catalog_name, **props)


class IcebergSink:
    """Applies batches of typed blocks to Iceberg tables, exactly once per (application id, batch id)."""

    def __init__(self, options: IcebergOptions, app_id: str):
        if options.mode not in MODES:
            raise ValueError(f"mode {options.mode!r}: allowed {', '.join(MODES)}")
        self.options = options
        self.app_id = app_id

    @cached_property
    def catalog(self) -> Catalog:
        """The catalog, opened when first needed (never in a Spark task that writes files)."""
        return open_catalog(self.options)

    def identifier(self, changes: TopicChanges) -> str:
        """The table's identifier, `namespace.name`, each made of letters, digits and `_` (see the
        module's docstring)."""
        namespace, _, name = table_name(self.options.table_name_format, changes).rpartition(".")
        return f"{safe_name(namespace or DEFAULT_NAMESPACE, '_')}.{safe_name(name, '_')}"

    def write(self, blocks: list[TypedBlock], batch_id: int) -> dict[str, int]:
        """Apply one batch; the rows written per table identifier, none for a table that already
        holds this batch."""
        written = {}
        for changes in batch_changes(blocks, reduced=self.options.mode == "merge", placeholder=self.options.placeholder).values():
            identifier = self.identifier(changes)
            n = self._write_table(identifier, changes, batch_id)
            if n is not None:
                written[identifier] = n
        return written

    def write_files(self, blocks: list[TypedBlock], batch_id: int, first: int, name: str) -> list[DataFile]:
        """Change-log mode in a Spark task: write the change-log rows of its part of a batch as one
        parquet file per table (`_batch_order` from `first`, the file named `headwater-<batch>-<name>`)
        under `<catalog.warehouse>/<namespace>.db/<name>/data/`, for `commit_files` to commit; a local
        warehouse only."""
        files = []
        for changes in batch_changes(blocks, reduced=False).values():
            identifier = self.identifier(changes)
            namespace, _, table = identifier.partition(".")
            directory = Path(self.options.warehouse, f"{namespace}.db", table, "data").resolve()
            directory.mkdir(parents=True, exist_ok=True)
            rows = cast_types(changes.changelog(batch_id, first), iceberg_type)
            path = directory / f"headwater-{batch_id}-{name}.parquet"
            pq.write_table(rows, path)
            files.append(DataFile(identifier, str(path), path.stat().st_size, len(rows), rows.schema))
        return files

    def commit_files(self, files: list[DataFile], batch_id: int) -> dict[str, int]:
        """Change-log mode on the driver: commit the files the tasks wrote for a batch, one snapshot per
        table (`add_files`, in the transaction that creates the table or adds the columns the files
        have); a table that already holds the batch commits nothing, and its files stay out of the
        table. The rows committed per table identifier."""
        by_table: dict[str, list[DataFile]] = defaultdict(list)
        for f in files:
            by_table[f.table].append(f)
        written = {}
        for identifier, parts in by_table.items():
            try:
                table: Table | None = self.catalog.load_table(identifier)
            except NoSuchTableError:
                table = None
            if table is not None:
                done = applied_batch(table, self.app_id)
                if done is not None and done >= batch_id:
                    continue
            tx = self._transaction(identifier, table, pa.unify_schemas([f.schema for f in parts]))
            # no duplicate check (a scan of every file the table has): the files' names are new, and
            # a batch the table holds is not committed again
            tx.add_files([f.path for f in parts], snapshot_properties={APP_ID: self.app_id, BATCH_ID: str(batch_id)},
                         check_duplicate_files=False)
            tx.commit_transaction()
            written[identifier] = sum(f.rows for f in parts)
        return written

    def applied_batch(self, identifier: str) -> int | None:
        """The last batch id the table holds for this sink, None if none (or no table)."""
        try:
            return applied_batch(self.catalog.load_table(identifier), self.app_id)
        except NoSuchTableError:
            return None

    def _write_table(self, identifier: str, changes: TopicChanges, batch_id: int) -> int | None:
        props = {APP_ID: self.app_id, BATCH_ID: str(batch_id)}
        try:
            table: Table | None = self.catalog.load_table(identifier)
        except NoSuchTableError:
            table = None
        if table is not None:
            done = applied_batch(table, self.app_id)
            if done is not None and done >= batch_id:
                return None
        if self.options.mode == "changelog":
            rows = cast_types(changes.changelog(batch_id), iceberg_type)
            tx = self._transaction(identifier, table, rows.schema)
            written = len(rows)
        else:
            upserts, deletes, unavailable = changes.upserts_and_deletes()
            rows = cast_types(upserts, iceberg_type)
            tx = self._transaction(identifier, table, rows.schema)
            if table is not None and changes.truncated:
                tx.delete(AlwaysTrue(), snapshot_properties=props)
            elif table is not None:
                touched = pa.concat_tables([rows.select(changes.key), cast_types(deletes, iceberg_type)])
                if len(touched):
                    rows = _replace_keys(tx, table, touched, changes.key, rows, props, unavailable)
            written = len(upserts) + len(deletes)
        tx.append(rows, snapshot_properties=props)  # an empty append still records the batch
        tx.commit_transaction()
        return written

    def _transaction(self, identifier: str, table: Table | None, schema: pa.Schema) -> Transaction:
        """A transaction on the table, created (with its partitioning) if missing, with the columns of
        `schema` it lacks added."""
        if table is None:
            self.catalog.create_namespace_if_not_exists(identifier.partition(".")[0])
            tx: Transaction = self.catalog.create_table_transaction(identifier, schema)
            partition_by = [c for c in self.options.partition_by if c in schema.names]
            if partition_by:
                with tx.update_spec() as spec:
                    for column in partition_by:
                        spec.add_identity(column)
            return tx
        tx = table.transaction()
        known = {f.name for f in table.schema().fields}
        if any(name not in known for name in schema.names):
            with tx.update_schema() as update:
                update.union_by_name(schema)
        return tx


def _replace_keys(tx: Transaction, table: Table, touched: pa.Table, key: list[str], rows: pa.Table,
                  props: dict[str, str], unavailable: dict[str, pa.Array]) -> pa.Table:
    """Delete in `tx` the rows of every key in `touched`; the rows to append: `rows` (their cells of
    unchanged TOAST, per column in `unavailable`, with the value of the row they replace) and the
    table's untouched rows the delete took along.

    The delete goes by the range of the key's first column in `touched` (pyiceberg binds an `In` of
    many values slowly: ~0.2 s per 10,000 keys, each time it plans); the table's rows in that range
    whose key the batch does not touch are read (an anti join on the key) and written back. A batch
    of new keys only (a snapshot's) finds no rows in its range, and deletes nothing."""
    lo, hi = pc.min_max(touched.column(key[0])).values()
    within = And(GreaterThanOrEqual(key[0], lo.as_py()),  # type: ignore[call-arg, arg-type]
                 LessThanOrEqual(key[0], hi.as_py()))  # type: ignore[call-arg, arg-type]
    existing = table.scan(row_filter=within).to_arrow()
    if not len(existing):
        return rows
    for column, mask in unavailable.items():
        if column in existing.column_names:
            rows, _ = fill_column(rows, column, mask, key, existing)
    positions = existing.select(key).append_column("__row", int64_array(np.arange(len(existing))))
    untouched = positions.join(touched.cast(positions.select(key).schema), keys=key, join_type="left anti")
    tx.delete(within, snapshot_properties=props)
    kept = existing.take(untouched.column("__row"))  # with the columns the batch's rows lack (dropped ones)
    kept = kept.cast(pa.schema([rows.schema.field(f.name) if f.name in rows.schema.names else f for f in kept.schema]))
    return pa.concat_tables([kept, rows], promote_options="default")


def applied_batch(table: Table, app_id: str) -> int | None:
    """The batch id of the last snapshot, walking back from the current one, that `app_id` committed."""
    snapshot = table.current_snapshot()
    while snapshot is not None:
        summary = snapshot.summary
        batch = summary.get(BATCH_ID) if summary is not None and summary.get(APP_ID) == app_id else None
        if batch is not None:
            return int(batch)
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return None


def expire_snapshots(options: IcebergOptions, older_than: datetime) -> dict[str, int]:
    """Expire the snapshots older than `older_than` (never a branch's current one) of every table in
    the catalog: each micro-batch adds one or two, and pyiceberg's commits slow down as a table's
    metadata grows (half of an update batch's time at ~30 snapshots). The snapshots expired per
    table; their data files stay on disk (pyiceberg deletes none)."""
    catalog = open_catalog(options)
    expired = {}
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            table = catalog.load_table(identifier)
            before = len(table.metadata.snapshots)
            table.maintenance.expire_snapshots().older_than(older_than).commit()
            expired[".".join(identifier)] = before - len(catalog.load_table(identifier).metadata.snapshots)
    return expired
