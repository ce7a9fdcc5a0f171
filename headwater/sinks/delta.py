"""The `delta` sink: a Delta Lake table per captured table, written with delta-rs (`deltalake`, no JVM).

Each table lives at `<path>/<table.name.format>` (default `${topic}`, characters other than letters,
digits and `._-` replaced by `_`). In `merge` mode (the default) a micro-batch is reduced to the last
change of each key (`sinks.changes`, `sinks.lake`) and applied as one Delta `MERGE`: matched keys are updated or
deleted, new ones inserted; a truncate in the batch makes it one overwrite with the rows that follow
it. A column whose value is PostgreSQL's unchanged TOAST (`__debezium_unavailable_value`, the
value older than the batch: `sinks.lake`) keeps the table's value: the MERGE updates that column of
such a row to its own value (a new key's row, from a primary-key change, gets the placeholder).
In `changelog` mode every change is appended as a row: the row image plus `_op`, `_change_type`,
`_commit_version`, `_commit_timestamp`, `_source_ts_ms`, `_batch_id` and `_batch_order` (the order of
the changes; a truncate is a row with `_op` `t`); unchanged TOAST is written as the placeholder.
A table is created by its first batch, partitioned by the `partition.by` columns it has; columns the
source adds are added to the table (Delta schema evolution), and a column the source drops stays,
null in the rows written after the drop.

Exactly once: every commit carries a Delta application transaction (`txn` action) with the sink's
application id and the batch id, in the same commit as the data, so a batch whose id the table
already holds is skipped: a replayed batch changes nothing.

Types: the row image's Arrow types (`events.arrow`) as Delta has them: timestamps in microseconds
(`timestamp` for a time zone's, `timestamp_ntz` otherwise), a time of day (Delta has no time type)
as text `HH:MM:SS.ffffff`, and a column without a type as text.

`optimize` compacts the small files each micro-batch leaves, `vacuum` removes the files no version
within the retention still needs (and files no version holds); both for every Delta table under
the sink's path.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Field, Schema, Transaction, write_deltalake
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from headwater.events.typed import TypedBlock
from headwater.sinks.lake import DataFile, TopicChanges, batch_changes, cast_types, safe_name, table_name
from headwater.sinks.lake_config import MODES, DeltaOptions

DELETE_FLAG = "__headwater_delete"  # the merge source's column that tells a delete from an upsert
KEEP_FLAG = "__headwater_keep_"  # + a column: the merge source's column marking unchanged TOAST in it
_DAY_US = 86_400_000_000


def delta_type(t: pa.DataType) -> pa.DataType:
    """The type Delta holds for a row image's (scalar) Arrow type."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_time(t) or pa.types.is_null(t):
        return pa.string()
    return t


def delta_table(rows: pa.Table) -> pa.Table:
    """`rows` in Delta's types (a time of day as text: 24:00:00 included, which Arrow does not print)."""
    columns = []
    for c in rows.columns:
        if pa.types.is_time(c.type):
            us = c.cast(pa.time64("us"))
            c = pc.if_else(pc.greater_equal(us.cast(pa.int64()), _DAY_US), "24:00:00.000000", us.cast(pa.string()))
        columns.append(c)
    return cast_types(pa.Table.from_arrays(columns, names=rows.column_names), delta_type)


class DeltaSink:
    """Applies batches of typed blocks to Delta tables, exactly once per (application id, batch id)."""

    def __init__(self, options: DeltaOptions, app_id: str):
        if options.mode not in MODES:
            raise ValueError(f"mode {options.mode!r}: allowed {', '.join(MODES)}")
        self.options = options
        self.app_id = app_id

    def location(self, changes: TopicChanges) -> str:
        """Where the table of a topic lives."""
        return f"{self.options.path.rstrip('/')}/{safe_name(table_name(self.options.table_name_format, changes))}"

    def write(self, blocks: list[TypedBlock], batch_id: int) -> dict[str, int]:
        """Apply one batch; the rows written (or merged) per table location, none for a table that
        already holds this batch."""
        written = {}
        for changes in batch_changes(blocks, reduced=self.options.mode == "merge", placeholder=self.options.placeholder).values():
            location = self.location(changes)
            n = self._write_table(location, changes, batch_id)
            if n is not None:
                written[location] = n
        return written

    def write_files(self, blocks: list[TypedBlock], batch_id: int, first: int, name: str) -> list[DataFile]:
        """Change-log mode in a Spark task: write the change-log rows of its part of a batch as one
        parquet file per table (`_batch_order` from `first`, the file named `headwater-<batch>-<name>`),
        into the table's directory, for `commit_files` to commit; a local path only."""
        files = []
        for changes in batch_changes(blocks, reduced=False).values():
            location = self.location(changes)
            rows = delta_table(changes.changelog(batch_id, first))
            Path(location).mkdir(parents=True, exist_ok=True)
            path = f"headwater-{batch_id}-{name}.parquet"
            pq.write_table(rows, f"{location}/{path}")
            files.append(DataFile(location, path, Path(location, path).stat().st_size, len(rows), rows.schema))
        return files

    def commit_files(self, files: list[DataFile], batch_id: int) -> dict[str, int]:
        """Change-log mode on the driver: commit the files the tasks wrote for a batch, one Delta commit
        per table with the batch's application transaction (a table that already holds the batch
        commits nothing; its files stay out of the table, for `vacuum`). The rows committed per table
        location; columns the files add are added to the table first."""
        by_table: dict[str, list[DataFile]] = defaultdict(list)
        for f in files:
            by_table[f.table].append(f)
        written = {}
        storage = self.options.storage_options or None
        for location, parts in by_table.items():
            table = DeltaTable(location, storage_options=storage) if DeltaTable.is_deltatable(location, storage) else None
            if table is not None and (table.transaction_version(self.app_id) or -1) >= batch_id:
                continue
            schema = pa.unify_schemas([f.schema for f in parts])
            now = int(time.time() * 1000)
            actions: list[AddAction | RemoveAction] = [AddAction(f.path, f.size, {}, now, True, json.dumps({"numRecords": f.rows})) for f in parts]
            commit = CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)],
                                      custom_metadata={"headwater.batch": str(batch_id)})
            if table is None:
                create_table_with_add_actions(location, Schema.from_arrow(schema), actions, mode="append",  # type: ignore[arg-type]
                                              storage_options=storage, commit_properties=commit)
            else:
                known = set(table.schema().to_arrow().names)
                added = [f for f in schema if f.name not in known]
                if added:  # a commit of its own before the data's (delta-rs's write transaction adds none)
                    table.alter.add_columns([Field.from_arrow(f) for f in added])
                table.create_write_transaction(actions, mode="append", schema=table.schema(), commit_properties=commit)
            written[location] = sum(f.rows for f in parts)
        return written

    def applied_batch(self, location: str) -> int | None:
        """The last batch id the table at `location` holds for this sink, None if none."""
        if not DeltaTable.is_deltatable(location, self.options.storage_options or None):
            return None
        return DeltaTable(location, storage_options=self.options.storage_options or None
                          ).transaction_version(self.app_id)

    def _write_table(self, location: str, changes: TopicChanges, batch_id: int) -> int | None:
        storage = self.options.storage_options or None
        table = DeltaTable(location, storage_options=storage) if DeltaTable.is_deltatable(location, storage) else None
        if table is not None and (table.transaction_version(self.app_id) or -1) >= batch_id:
            return None
        commit = CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)],
                                  custom_metadata={"headwater.batch": str(batch_id)})
        if self.options.mode == "changelog":
            rows = delta_table(changes.changelog(batch_id))
            self._append(table or location, rows, "append", commit)
            return len(rows)
        upserts, deletes, unavailable = changes.upserts_and_deletes()
        upserts = delta_table(upserts)
        if table is None or changes.truncated:
            self._append(table or location, upserts, "overwrite" if table is not None else "append", commit)
            return len(upserts)
        deletes = delta_table(deletes)
        dropped = [f for f in pa.schema(table.schema().to_arrow()) if f.name not in upserts.schema.names]
        for f in dropped:  # columns the source no longer has: null in the rows the batch writes
            upserts = upserts.append_column(f, pa.nulls(len(upserts), f.type))
        columns = upserts.column_names
        for column, mask in unavailable.items():
            upserts = upserts.append_column(KEEP_FLAG + column, mask)
        flags = [DELETE_FLAG, *(KEEP_FLAG + c for c in unavailable)]
        source = pa.concat_tables([
            upserts.append_column(DELETE_FLAG, pa.array([False] * len(upserts), pa.bool_())),
            deletes.append_column(DELETE_FLAG, pa.array([True] * len(deletes), pa.bool_())),
        ], promote_options="default")
        if not len(source):
            return 0
        on = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in changes.key)
        flag = f"s.{_quote(DELETE_FLAG)}"
        merge = (table.merge(source, on, source_alias="s", target_alias="t", merge_schema=True,
                             commit_properties=commit).when_matched_delete(flag))
        if unavailable:  # unchanged TOAST: such a cell keeps the target's value
            merge = merge.when_matched_update(predicate=f"NOT {flag}", updates={
                _quote(c): (f"CASE WHEN s.{_quote(KEEP_FLAG + c)} THEN t.{_quote(c)} ELSE s.{_quote(c)} END"
                            if c in unavailable else f"s.{_quote(c)}") for c in columns})
        else:
            merge = merge.when_matched_update_all(predicate=f"NOT {flag}", except_cols=flags)
        merge.when_not_matched_insert_all(predicate=f"NOT {flag}", except_cols=flags).execute()
        return len(source)

    def _append(self, target: DeltaTable | str, rows: pa.Table, mode: Literal["append", "overwrite"],
                commit: CommitProperties) -> None:
        partition_by = [c for c in self.options.partition_by if c in rows.column_names] or None
        if isinstance(target, DeltaTable):
            partition_by = target.metadata().partition_columns or None
        write_deltalake(target, rows, mode=mode, schema_mode="merge", partition_by=partition_by,  # type: ignore[call-overload]
                        storage_options=self.options.storage_options or None, commit_properties=commit)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def tables_under(path: str | Path) -> list[DeltaTable]:
    """The Delta tables in the directory `path` (a local path), one level down."""
    root = Path(path)
    return [DeltaTable(str(p)) for p in sorted(root.iterdir()) if p.is_dir() and DeltaTable.is_deltatable(str(p))]


def optimize(path: str | Path) -> dict[str, dict]:
    """Compact the small files of each Delta table under `path`: delta-rs's optimize's metrics per table."""
    return {t.table_uri: t.optimize.compact() for t in tables_under(path)}


def vacuum(path: str | Path, retention_hours: int | None = None) -> dict[str, list[str]]:
    """Delete the files no table version within `retention_hours` (default: the table's
    `delta.deletedFileRetentionDuration`, 7 days) needs, for each Delta table under `path`, and the
    files older than that no version holds (a replayed batch's task files): the files deleted per
    table. Files of a batch being written are seconds old: a retention of 0 while the query runs
    can delete them before their commit."""
    return {t.table_uri: t.vacuum(retention_hours, dry_run=False, enforce_retention_duration=retention_hours is None,
                                  full=True) for t in tables_under(path)}

