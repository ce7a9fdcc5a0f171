"""Table metadata from pg_catalog: the columns, keys and types the PostgreSQL connector needs.

Everything here works on an ordinary psycopg2 connection (no replication protocol) and returns
frozen, picklable dataclasses, so that the driver can read the catalog once and ship it to Spark
executors. One refresh costs three queries whatever the number of tables and columns: the tables
(with keys and replica identity), their columns, and -- once per connection, then only for type oids
not seen yet -- the types (`TypeRegistry`, with domain chains, array element types and enum labels).

Column metadata mirrors what Debezium takes from the JDBC driver (pgjdbc's `getColumns`), because
Debezium's schemas depend on it: `length` and `scale` are pgjdbc's COLUMN_SIZE and DECIMAL_DIGITS
(with Debezium's own rule for domains), and `jdbc_type_name` is pgjdbc's TYPE_NAME (`serial` and
friends for integer columns whose default calls nextval()).

`list_tables` applies Debezium's `schema.include.list` / `schema.exclude.list` /
`table.include.list` / `table.exclude.list` (`TableFilters` of connectors/common/filters.py); system
schemas (pg_catalog, information_schema, pg_temp*) and PostGIS's spatial_ref_sys are never captured.
`CatalogCache` keeps tables by oid for the streaming side and re-reads a table when a pgoutput
RELATION message no longer matches it (Debezium's schema.refresh.mode=columns_diff).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from headwater.connectors.common.filters import SystemTables, TableFilters

UNKNOWN_LENGTH = 2147483647  # pgjdbc's length for types without a length modifier
VARIABLE_NUMERIC_LENGTH = 131089  # pgjdbc's COLUMN_SIZE for numeric without precision

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")
SYSTEM_TABLES = ("spatial_ref_sys",)

# oids of the built-in types whose length/scale pgjdbc derives from the type modifier
INT2, INT4, INT8, OID, FLOAT4, FLOAT8 = 21, 23, 20, 26, 700, 701
BOOL, CHAR, NAME, TEXT, BPCHAR, VARCHAR, BYTEA = 16, 18, 19, 25, 1042, 1043, 17
NUMERIC, MONEY = 1700, 790
DATE, TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ, INTERVAL = 1082, 1083, 1266, 1114, 1184, 1186
BIT, VARBIT = 1560, 1562


@dataclass(frozen=True)
class PgType:
    """One row of pg_type, with what type conversion needs."""

    oid: int
    name: str  # typname
    schema: str  # nspname
    typtype: str  # b base, c composite, d domain, e enum, p pseudo, r range, m multirange
    category: str  # typcategory: A array, N numeric, S string, ...
    element: int = 0  # typelem of a true array type (typcategory 'A', typlen -1), else 0
    base: int = 0  # typbasetype of a domain
    base_typmod: int = -1  # typtypmod of a domain
    array: int = 0  # typarray: the oid of the array type over this one
    enum_labels: tuple[str, ...] = ()


@dataclass
class TypeRegistry:
    """The database's types by oid (and by name), loaded with `load_types`."""

    by_oid: dict[int, PgType] = field(default_factory=dict)

    def get(self, oid: int) -> PgType | None:
        return self.by_oid.get(oid)

    def named(self, name: str, schema: str | None = None) -> PgType | None:
        """A type by typname (in `schema` when given; else pg_catalog first, then any schema)."""
        found = [t for t in self.by_oid.values() if t.name == name and (schema is None or t.schema == schema)]
        if not found:
            return None
        found.sort(key=lambda t: (t.schema != "pg_catalog", t.schema != "public", t.oid))
        return found[0]

    def root(self, oid: int) -> PgType | None:
        """The type under all domains over `oid` (the type itself when it is no domain)."""
        t = self.by_oid.get(oid)
        seen = 0
        while t is not None and t.typtype == "d" and seen < 64:
            t = self.by_oid.get(t.base)
            seen += 1
        return t

    def domain_chain(self, oid: int) -> tuple[PgType, ...]:
        """The domains from `oid` down to (not including) its root type."""
        chain: list[PgType] = []
        t = self.by_oid.get(oid)
        while t is not None and t.typtype == "d" and len(chain) < 64:
            chain.append(t)
            t = self.by_oid.get(t.base)
        return tuple(chain)


@dataclass(frozen=True)
class ColumnInfo:
    """One column as the type converters see it. `root_*` describe the type under all domains."""

    name: str
    position: int  # attnum
    type_oid: int  # atttypid (a domain's oid for a domain column)
    type_name: str  # format_type(atttypid, atttypmod), e.g. 'character varying(10)'
    typname: str  # pg_type.typname of atttypid, e.g. 'varchar', 'mood', '_int4'
    jdbc_type_name: str  # pgjdbc's TYPE_NAME: typname, or serial/bigserial/smallserial
    typmod: int  # atttypmod
    not_null: bool
    default_expr: str | None  # pg_get_expr(adbin): a default or a generation expression
    is_generated: bool = False  # GENERATED ALWAYS AS (...) STORED (pgoutput does not send these)
    identity: str = ""  # attidentity: '' or 'a' (ALWAYS) or 'd' (BY DEFAULT)
    dimensions: int = 0  # attndims as declared (0 for an array column made by CREATE TABLE AS)
    length: int = UNKNOWN_LENGTH  # pgjdbc COLUMN_SIZE (Debezium's column length)
    scale: int | None = None  # pgjdbc DECIMAL_DIGITS (Debezium's column scale), None when absent
    root_oid: int = 0  # the type under all domains
    root_name: str = ""
    root_typtype: str = "b"
    root_category: str = ""
    element_oid: int = 0  # for an array column: the element type (under its domains: element_root_oid)
    element_name: str = ""
    element_root_oid: int = 0
    element_root_name: str = ""
    element_typtype: str = ""
    enum_labels: tuple[str, ...] = ()  # of the enum, or of the array's enum element type
    domains: tuple[str, ...] = ()  # domain names from the declared type down to the root
    comment: str | None = None  # col_description (Debezium propagates it with the source type)

    @property
    def has_default(self) -> bool:
        return self.default_expr is not None and not self.is_generated

    @property
    def is_array(self) -> bool:
        return self.element_oid != 0

    def with_typmod(self, typmod: int) -> ColumnInfo:
        """This column with another type modifier (of the same type): length and scale follow it.

        Only for a column whose type is not a domain (a domain column's modifier is always -1)."""
        sized_oid = self.element_root_oid or self.root_oid
        length, scale = jdbc_length_scale(sized_oid, typmod)
        return replace(self, typmod=typmod, length=length, scale=scale)


@dataclass(frozen=True)
class TableSchema:
    """A captured table: its columns in attnum order, keys and replica identity."""

    schema: str
    name: str
    oid: int
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...] = ()
    replica_identity: str = "d"  # relreplident: d default, f full, n nothing, i index
    identity_index_columns: tuple[str, ...] = ()  # columns of the REPLICA IDENTITY USING INDEX index
    relkind: str = "r"  # r table, p partitioned table
    unique_key: tuple[str, ...] = ()  # columns of the first unique index by name (no predicate, no expressions)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The event key's columns, as Debezium picks them: the primary key, else a unique index."""
        return self.primary_key or self.unique_key

    @property
    def id(self) -> str:
        return f"{self.schema}.{self.name}"

    def column(self, name: str) -> ColumnInfo:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def matches(self, relation_columns: Sequence[Any]) -> bool:
        """Whether pgoutput RELATION columns (name, type_oid, type_modifier) agree with this table.

        Generated columns are left out: pgoutput does not send them (before PostgreSQL 18).
        """
        mine = [(c.name, c.type_oid, c.typmod) for c in self.columns if not c.is_generated]
        theirs = [(c.name, c.type_oid, c.type_modifier) for c in relation_columns]
        return mine == theirs

    def layout_for(self, relation_columns: Sequence[Any]) -> tuple[ColumnInfo, ...]:
        """The ColumnInfos in the order of a pgoutput RELATION message's columns.

        The schema at a log position is the message's: a column's length, precision and scale come
        from the message's type modifier (the catalog, read later, may hold a newer one after an
        ALTER COLUMN ... TYPE), and only what the message cannot say (NOT NULL, the default, enum
        labels, domains) from the catalog -- as Debezium does when it reads a RELATION message.
        A column the catalog does not know, or knows with another type (DDL raced the read), gets a
        bare ColumnInfo built from the message's type oid and modifier, which types.py converts
        when it is a built-in type.
        """
        by_name = {c.name: c for c in self.columns}
        out = []
        for i, rc in enumerate(relation_columns, 1):
            c = by_name.get(rc.name)
            if c is not None and c.type_oid == rc.type_oid and c.typmod != rc.type_modifier:
                c = c.with_typmod(rc.type_modifier)
            elif c is None or c.type_oid != rc.type_oid:
                c = _message_column(rc, i, c)
            out.append(c)
        return tuple(out)


def _message_column(rc: Any, position: int, catalog: ColumnInfo | None) -> ColumnInfo:
    """A RELATION message column whose type the catalog does not hold (any more): its type from
    the message (named when it is a built-in scalar type), NOT NULL and the default from the
    catalog's column of that name, as Debezium takes them."""
    oid, typmod = rc.type_oid, rc.type_modifier
    name = BUILTIN_TYPE_NAMES.get(oid, str(oid))
    length, scale = jdbc_length_scale(oid, typmod)
    return ColumnInfo(name=rc.name, position=position, type_oid=oid, type_name=name, typname=name,
                      jdbc_type_name=name, typmod=typmod,
                      not_null=catalog.not_null if catalog is not None else False,
                      default_expr=catalog.default_expr if catalog is not None else None,
                      length=length, scale=scale, root_oid=oid, root_name=name)


# ---------------------------------------------------------------------------------------- types

# pg_catalog's scalar types by oid (fixed across PostgreSQL versions), for a RELATION message's
# column whose type the catalog read no longer shows
BUILTIN_TYPE_NAMES = {
    BOOL: "bool", BYTEA: "bytea", CHAR: "char", NAME: "name", INT8: "int8", INT2: "int2", INT4: "int4",
    TEXT: "text", OID: "oid", 114: "json", 142: "xml", 600: "point", FLOAT4: "float4", FLOAT8: "float8",
    MONEY: "money", 829: "macaddr", 869: "inet", 650: "cidr", BPCHAR: "bpchar", VARCHAR: "varchar",
    DATE: "date", TIME: "time", TIMESTAMP: "timestamp", TIMESTAMPTZ: "timestamptz", INTERVAL: "interval",
    TIMETZ: "timetz", BIT: "bit", VARBIT: "varbit", NUMERIC: "numeric", 2950: "uuid", 3614: "tsvector",
    3802: "jsonb",
}

_TYPES_SELECT = """
SELECT t.oid, t.typname, n.nspname, t.typtype, t.typcategory,
       CASE WHEN t.typcategory = 'A' AND t.typlen = -1 THEN t.typelem ELSE 0 END,
       t.typbasetype, t.typtypmod, t.typarray
FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
"""
_ALL_TYPES_SQL = _TYPES_SELECT + """
WHERE t.typtype <> 'c' OR n.nspname IN ('pg_catalog', 'information_schema')
   OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid AND c.relkind IN ('r', 'p', 't'))
"""

_ENUMS_SQL = """
SELECT enumtypid, array_agg(enumlabel::text ORDER BY enumsortorder)
FROM pg_catalog.pg_enum GROUP BY enumtypid
"""


def _query(conn: Any, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def load_types(conn: Any, oids: Iterable[int] | None = None, registry: TypeRegistry | None = None) -> TypeRegistry:
    """Load pg_type (all of it, or only `oids` and what they refer to) into `registry` (or a new one).

    Composite types of user tables are skipped in a full load (there is one per table); they are
    loaded when asked for by oid.
    """
    registry = registry if registry is not None else TypeRegistry()
    if oids is None:
        rows = _query(conn, _ALL_TYPES_SQL)
    else:
        wanted = sorted({int(o) for o in oids if o})
        rows = []
        while wanted:  # the asked-for types, then the element and base types they refer to
            found = _query(conn, _TYPES_SELECT + " WHERE t.oid = ANY(%s)", (wanted,))
            rows.extend(found)
            known = {r[0] for r in rows} | set(registry.by_oid)
            wanted = sorted({o for r in found for o in (r[5], r[6]) if o and o not in known})
    enums = dict(_query(conn, _ENUMS_SQL))
    for oid, name, schema, typtype, category, element, base, base_typmod, array in rows:
        registry.by_oid[oid] = PgType(oid, name, schema, typtype, category, element, base, base_typmod, array,
                                      tuple(enums.get(oid) or ()))
    return registry


def resolve_type_oids(conn: Any, registry: TypeRegistry, oids: Iterable[int]) -> TypeRegistry:
    """Make sure every oid in `oids` (e.g. from a pgoutput RELATION or TYPE message) is in `registry`.

    Queries the database only for oids not known yet (with their base and element types).
    """
    missing = {int(o) for o in oids if o and int(o) not in registry.by_oid}
    if missing:
        load_types(conn, missing, registry)
    return registry


# --------------------------------------------------------------------------- length and scale


def _seconds_size(typmod: int) -> int:
    if typmod == -1:
        return 7
    if typmod == 1:
        return 3  # pgjdbc: "Bizarrely SELECT '0:0:0.1'::time(1); returns 2 digits"
    return typmod + 1 if typmod > 0 else 0


def jdbc_length(oid: int, typmod: int) -> int:
    """pgjdbc's COLUMN_SIZE (TypeInfoCache.getPrecision/getDisplaySize) for a built-in type oid."""
    if oid == INT2:
        return 5
    if oid in (INT4, OID):
        return 10
    if oid == INT8:
        return 19
    if oid == FLOAT4:
        return 8
    if oid == FLOAT8:
        return 17
    if oid == NUMERIC:
        return 0 if typmod == -1 else ((typmod - 4) >> 16) & 0xFFFF
    if oid in (CHAR, BOOL):
        return 1
    if oid in (BPCHAR, VARCHAR):
        return UNKNOWN_LENGTH if typmod == -1 else typmod - 4
    if oid == DATE:
        return 13
    if oid == TIME:
        return 8 + _seconds_size(typmod)
    if oid == TIMETZ:
        return 8 + _seconds_size(typmod) + 6
    if oid == TIMESTAMP:
        return 22 + _seconds_size(typmod)
    if oid == TIMESTAMPTZ:
        return 22 + _seconds_size(typmod) + 6
    if oid == INTERVAL:
        return 49
    if oid == BIT:
        return typmod
    if oid == VARBIT:
        return UNKNOWN_LENGTH if typmod == -1 else typmod
    return UNKNOWN_LENGTH


def jdbc_scale(oid: int, typmod: int) -> int:
    """pgjdbc's DECIMAL_DIGITS (TypeInfoCache.getScale) for a built-in type oid."""
    if oid == FLOAT4:
        return 8
    if oid == FLOAT8:
        return 17
    if oid == NUMERIC:
        return 0 if typmod == -1 else (typmod - 4) & 0xFFFF
    if oid in (TIME, TIMETZ, TIMESTAMP, TIMESTAMPTZ):
        return 6 if typmod == -1 else typmod
    if oid == INTERVAL:
        return 6 if typmod == -1 else typmod & 0xFFFF
    return 0


def jdbc_length_scale(oid: int, typmod: int) -> tuple[int, int | None]:
    """pgjdbc's (COLUMN_SIZE, DECIMAL_DIGITS) of a column of a built-in type oid and modifier;
    no DECIMAL_DIGITS (None) for an unconstrained numeric."""
    scale = None if oid == NUMERIC and typmod == -1 else jdbc_scale(oid, typmod)
    return jdbc_length(oid, typmod), scale


# ------------------------------------------------------------------------------------ columns

_COLUMNS_SQL = """
SELECT a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod, a.attnotnull, a.attndims,
       pg_catalog.format_type(a.atttypid, a.atttypmod),
       pg_catalog.pg_get_expr(d.adbin, d.adrelid), a.attgenerated, a.attidentity,
       pg_catalog.col_description(a.attrelid, a.attnum)
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""

_TABLES_SQL = """
SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident,
       (SELECT array_agg(a.attname::text ORDER BY k.ord)
          FROM pg_catalog.pg_index i, unnest(i.indkey) WITH ORDINALITY k(attnum, ord), pg_catalog.pg_attribute a
         WHERE i.indrelid = c.oid AND i.indisprimary AND a.attrelid = c.oid AND a.attnum = k.attnum),
       (SELECT array_agg(a.attname::text ORDER BY k.ord)
          FROM pg_catalog.pg_index i, unnest(i.indkey) WITH ORDINALITY k(attnum, ord), pg_catalog.pg_attribute a
         WHERE i.indrelid = c.oid AND i.indisreplident AND a.attrelid = c.oid AND a.attnum = k.attnum),
       (SELECT array_agg(a.attname::text ORDER BY k.ord)
          FROM (SELECT i.indkey FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
                 WHERE i.indrelid = c.oid AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
                 ORDER BY ic.relname LIMIT 1) u,
               unnest(u.indkey) WITH ORDINALITY k(attnum, ord), pg_catalog.pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum = k.attnum)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p')
"""


def make_column(registry: TypeRegistry, name: str, position: int, type_oid: int, typmod: int,
                not_null: bool = False, default_expr: str | None = None, type_name: str | None = None,
                generated: str = "", identity: str = "", dimensions: int = 0,
                comment: str | None = None) -> ColumnInfo:
    """Build a ColumnInfo from raw attribute data (a catalog row or a pgoutput RELATION column)."""
    declared = registry.get(type_oid)
    typname = declared.name if declared else str(type_oid)
    root = registry.root(type_oid) or declared
    chain = registry.domain_chain(type_oid)
    root_oid = root.oid if root else type_oid
    jdbc_name = typname
    if default_expr and "nextval(" in default_expr:
        jdbc_name = {"int4": "serial", "int8": "bigserial", "int2": "smallserial"}.get(typname, typname)
    effective_mod = typmod
    if typmod == -1:
        # Debezium's TypeRegistry walks the whole domain chain down to a type modifier (so a domain
        # over a domain inherits it too, whatever its docs say)
        effective_mod = next((d.base_typmod for d in chain if d.base_typmod != -1), -1)
    element_oid = root.element if root else 0
    element = registry.get(element_oid) if element_oid else None
    element_root = registry.root(element_oid) if element_oid else None
    # pgjdbc sizes an array column by its element type and the column's modifier
    sized_oid = element_root.oid if element_root is not None else root_oid
    length, scale = jdbc_length_scale(sized_oid, effective_mod)
    labels: tuple[str, ...] = ()
    if root is not None and root.typtype == "e":
        labels = root.enum_labels
    elif element_root is not None and element_root.typtype == "e":
        labels = element_root.enum_labels
    return ColumnInfo(
        name=name, position=position, type_oid=type_oid,
        type_name=type_name if type_name is not None else typname,
        typname=typname, jdbc_type_name=jdbc_name, typmod=typmod, not_null=not_null,
        default_expr=default_expr, is_generated=generated == "s", identity=identity or "",
        dimensions=dimensions, length=length, scale=scale,
        root_oid=root_oid, root_name=root.name if root else typname,
        root_typtype=root.typtype if root else "b", root_category=root.category if root else "",
        element_oid=element_oid, element_name=element.name if element else "",
        element_root_oid=element_root.oid if element_root else 0,
        element_root_name=element_root.name if element_root else "",
        element_typtype=element_root.typtype if element_root else "",
        enum_labels=labels, domains=tuple(d.name for d in chain), comment=comment,
    )


def read_tables(conn: Any, tables: Iterable[int | str] | None = None,
                registry: TypeRegistry | None = None) -> list[TableSchema]:
    """The metadata of tables given by oid or 'schema.table' name (all user tables when None).

    Returns TableSchemas sorted by oid (creation order); tables that do not exist are left out.
    `registry` is loaded when not given, and completed with any type oid it lacks.
    """
    if tables is None:
        rows = _query(conn, _TABLES_SQL)
    else:
        wanted = list(tables)
        oids = [t for t in wanted if isinstance(t, int)]
        names = [t for t in wanted if isinstance(t, str)]
        rows = _query(conn, _TABLES_SQL + " AND (c.oid = ANY(%s::oid[]) OR n.nspname || '.' || c.relname = ANY(%s))",
                      (oids, names))
    if not rows:
        return []
    if registry is None:
        registry = load_types(conn)
    by_oid = {r[0]: r for r in rows}
    col_rows = _query(conn, _COLUMNS_SQL, (sorted(by_oid),))
    resolve_type_oids(conn, registry, {r[3] for r in col_rows})
    columns: dict[int, list[ColumnInfo]] = {oid: [] for oid in by_oid}
    for relid, attnum, attname, typid, typmod, notnull, ndims, fmt, default, generated, identity, comment \
            in col_rows:
        columns[relid].append(make_column(registry, attname, attnum, typid, typmod, notnull, default, fmt,
                                          generated, identity, ndims, comment))
    return [TableSchema(schema=nsp, name=rel, oid=oid, columns=tuple(columns[oid]), primary_key=tuple(pk or ()),
                        replica_identity=replident, identity_index_columns=tuple(ri_cols or ()), relkind=relkind,
                        unique_key=tuple(uk or ()))
            for oid, (_, nsp, rel, relkind, replident, pk, ri_cols, uk) in sorted(by_oid.items())]


def read_table(conn: Any, schema: str, name: str, registry: TypeRegistry | None = None) -> TableSchema:
    """One table's metadata; KeyError when there is no such table."""
    found = read_tables(conn, [f"{schema}.{name}"], registry)
    if not found:
        raise KeyError(f"{schema}.{name}")
    return found[0]


# ------------------------------------------------------------------------------------ filters

PG_SYSTEM = SystemTables(SYSTEM_SCHEMAS, ("pg_temp",), SYSTEM_TABLES)


def table_filters(props: Mapping[str, Any] | Any = None) -> TableFilters:
    """The table filters of a configuration (or none), with PostgreSQL's system tables left out."""
    return TableFilters.from_config(props or {}, PG_SYSTEM)


@dataclass(frozen=True, order=True)
class TableId:
    """A captured table: oid, schema and name."""

    oid: int
    schema: str
    name: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


_TABLE_NAMES_SQL = """
SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') ORDER BY 2, 3
"""


def list_tables(conn: Any, filters: TableFilters | Mapping[str, Any] | None = None) -> list[TableId]:
    """The tables and partitioned tables the filters capture, sorted by schema and name."""
    if not isinstance(filters, TableFilters):
        filters = table_filters(filters)
    return [TableId(oid, s, t) for oid, s, t in _query(conn, _TABLE_NAMES_SQL) if filters.includes(s, t)]


# ------------------------------------------------------------------------------ the cache


class CatalogCache:
    """Table metadata by oid for the streaming side, refreshed when a RELATION message differs.

    `connection` is a callable returning an open psycopg2 connection (called lazily, again after
    the connection closes). `check(relation)` compares a pgoutput Relation with the cached table
    (column names, types and type modifiers, as Debezium's schema.refresh.mode=columns_diff does)
    and re-reads the table when they differ; `get(oid)` is None for a table the filters exclude.
    """

    def __init__(self, connection: Any, filters: TableFilters | None = None):
        self._factory = connection
        self._conn: Any = None
        self.filters = filters or table_filters()
        self.registry: TypeRegistry | None = None
        self.tables: dict[int, TableSchema | None] = {}

    def connection(self) -> Any:
        if self._conn is None or getattr(self._conn, "closed", False):
            self._conn = self._factory() if callable(self._factory) else self._factory
        return self._conn

    def known(self, oid: int) -> bool:
        return oid in self.tables

    def get(self, oid: int) -> TableSchema | None:
        if oid not in self.tables:
            self.refresh([oid])
        return self.tables.get(oid)

    def refresh(self, oids: Iterable[int]) -> None:
        """Re-read the given tables (one round of queries for all of them)."""
        oids = list(oids)
        conn = self.connection()
        if self.registry is None:
            self.registry = load_types(conn)
        found = {t.oid: t for t in read_tables(conn, oids, self.registry)}
        for oid in oids:
            t = found.get(oid)
            self.tables[oid] = t if t is not None and self.filters.includes(t.schema, t.name) else None

    def check(self, relation: Any) -> TableSchema | None:
        """Refresh the table of a pgoutput Relation when its columns differ from the cache."""
        oid = relation.oid
        cached = self.tables.get(oid)
        if oid not in self.tables or (cached is not None and not cached.matches(relation.columns)):
            self.refresh([oid])
        return self.tables.get(oid)


