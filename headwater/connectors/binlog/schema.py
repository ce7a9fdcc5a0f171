"""The tracked schema of a MySQL/MariaDB table: its columns as Debezium's relational model holds them.

`Table` and `Column` mirror Debezium's `Table` and `Column` (the fields its schema change events
write in `tableChanges`); `to_debezium()` gives that JSON form, `to_json()`/`from_json()` everything
the model holds (the schema history's durable form). Schema history builds them from DDL, the
snapshot from the server's own description of a table; record building reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# the integer column types (`Column.type_name`'s first word)
INTEGER_TYPES = frozenset(("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER", "BIGINT"))


@dataclass(frozen=True)
class Column:
    """One column, as Debezium's `Column` holds it."""

    name: str
    type_name: str  # Debezium's `typeName`, upper case: "INT", "INT UNSIGNED", "VARCHAR", "ENUM", ...
    type_expression: str  # Debezium's `typeExpression`
    jdbc_type: int  # java.sql.Types constant
    length: int | None  # M: display width, characters, bytes, bits, or the fraction digits of a time type
    scale: int | None
    position: int  # 1-based
    optional: bool
    auto_incremented: bool = False
    generated: bool = False
    charset: str | None = None
    comment: str | None = None
    has_default: bool = False
    default_expression: str | None = None
    enum_values: tuple[str, ...] | None = None  # ENUM and SET members, unquoted
    native_type: int | None = None

    def to_debezium(self) -> dict[str, Any]:
        """The column in a schema change event's `tableChanges` (the fields Debezium writes there)."""
        return {
            "name": self.name, "jdbcType": self.jdbc_type, "nativeType": self.native_type,
            "typeName": self.type_name, "typeExpression": self.type_expression,
            "charsetName": self.charset, "length": self.length, "scale": self.scale,
            "position": self.position, "optional": self.optional,
            "autoIncremented": self.auto_incremented, "generated": self.generated,
            "comment": self.comment, "defaultValueExpression": self.default_expression,
            "enumValues": list(self.enum_values) if self.enum_values is not None else None,
        }

    def to_json(self) -> dict[str, Any]:
        """Everything the model holds, for the schema history (`from_json` reads it back)."""
        return {**self.to_debezium(), "hasDefaultValue": self.has_default}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Column:
        enum_values = data.get("enumValues")
        return cls(
            name=data["name"], type_name=data["typeName"], type_expression=data["typeExpression"],
            jdbc_type=data["jdbcType"], length=data["length"], scale=data["scale"], position=data["position"],
            optional=data["optional"], auto_incremented=data["autoIncremented"], generated=data["generated"],
            charset=data["charsetName"], comment=data["comment"], has_default=data.get("hasDefaultValue", False),
            default_expression=data["defaultValueExpression"],
            enum_values=tuple(enum_values) if enum_values is not None else None, native_type=data["nativeType"],
        )


@dataclass(frozen=True)
class Table:
    """One table: database (the `schema` of record building), name, columns in order, primary key."""

    database: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    default_charset: str | None = None
    comment: str | None = None

    @property
    def schema(self) -> str:
        return self.database

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.primary_key

    @property
    def id(self) -> str:
        """Debezium's table id in `tableChanges`: `"db"."table"`."""
        return f'"{self.database}"."{self.name}"'

    def column(self, name: str) -> Column | None:
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    @property
    def integer_key(self) -> bool:
        """Whether the primary key is one integer column (unique and never NULL: a snapshot's key ranges may be
        cut by arithmetic, `snapshot.dense_ranges`)."""
        column = self.column(self.primary_key[0]) if len(self.primary_key) == 1 else None
        return column is not None and column.type_name.split()[0] in INTEGER_TYPES

    def to_debezium(self) -> dict[str, Any]:
        return {
            "defaultCharsetName": self.default_charset,
            "primaryKeyColumnNames": list(self.primary_key),
            "columns": [c.to_debezium() for c in self.columns],
            "comment": self.comment,
        }

    def to_json(self) -> dict[str, Any]:
        """Everything the model holds, for the schema history (`from_json` reads it back)."""
        return {"database": self.database, "name": self.name, **self.to_debezium(),
                "columns": [c.to_json() for c in self.columns]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Table:
        return cls(data["database"], data["name"], tuple(Column.from_json(c) for c in data["columns"]),
                   tuple(data["primaryKeyColumnNames"]), data["defaultCharsetName"], data["comment"])
