"""Which tables a connector captures: Debezium's schema and table include and exclude lists.

`schema.include.list` / `schema.exclude.list` / `table.include.list` / `table.exclude.list` are
comma-separated regular expressions matched case-insensitively against the whole schema name (a
MySQL database name) or the whole `schema.table` name. A connector adds its system tables, never
captured (`SystemTables`: PostgreSQL's pg_catalog, information_schema, pg_temp* and PostGIS's
spatial_ref_sys).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def patterns(values: Iterable[str] | str | None) -> tuple[re.Pattern[str], ...] | None:
    """A list property's regexes (a comma-separated string or a list), None when it is empty."""
    if values is None:
        return None
    if isinstance(values, str):
        values = values.split(",")
    compiled = tuple(re.compile(v.strip(), re.IGNORECASE) for v in values if v and v.strip())
    return compiled or None


def matches_any(values: Iterable[str] | str, name: str) -> bool:
    """Whether `name` matches one of Debezium's list-property regexes (whole name, case-insensitive)."""
    return any(p.fullmatch(name) for p in patterns(values) or ())


@dataclass(frozen=True)
class SystemTables:
    """A database's own tables, never captured: by schema name, schema name prefix and table name
    (all lower case)."""

    schemas: tuple[str, ...] = ()
    schema_prefixes: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()

    def holds(self, schema: str, table: str) -> bool:
        low = schema.lower()
        return low in self.schemas or low.startswith(self.schema_prefixes) or table.lower() in self.tables


@dataclass(frozen=True)
class TableFilters:
    """Debezium's schema/table include and exclude lists (anchored, case-insensitive regexes)."""

    schema_include: tuple[re.Pattern[str], ...] | None = None
    schema_exclude: tuple[re.Pattern[str], ...] | None = None
    table_include: tuple[re.Pattern[str], ...] | None = None
    table_exclude: tuple[re.Pattern[str], ...] | None = None
    system: SystemTables = SystemTables()

    @classmethod
    def from_config(cls, props: Mapping[str, Any] | Any, system: SystemTables = SystemTables()) -> TableFilters:
        """From a ConnectorConfig or a plain dict of properties."""
        def get(name: str) -> Any:
            try:
                return props.get(name)
            except KeyError:
                return None

        return cls(patterns(get("schema.include.list")), patterns(get("schema.exclude.list")),
                   patterns(get("table.include.list")), patterns(get("table.exclude.list")), system)

    def includes(self, schema: str, table: str) -> bool:
        """Whether Debezium captures `schema`.`table`."""
        if self.system.holds(schema, table):
            return False
        if self.schema_include is not None and not any(p.fullmatch(schema) for p in self.schema_include):
            return False
        if self.schema_exclude is not None and any(p.fullmatch(schema) for p in self.schema_exclude):
            return False
        full = f"{schema}.{table}"
        if self.table_include is not None and not any(p.fullmatch(full) for p in self.table_include):
            return False
        return not (self.table_exclude is not None and any(p.fullmatch(full) for p in self.table_exclude))
