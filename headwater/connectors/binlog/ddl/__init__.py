"""MySQL/MariaDB DDL, parsed into changes to the tracked tables as Debezium's binlog connectors make them.

`apply_statement` is the entry point; `SchemaState` holds what it changes; `SchemaChange` is one
schema change event. The modules: `lexer` (tokens), `datatypes` (column types), `columns` (column
definitions), `tables` (edits to one table), `statements` (the statements), `state` (the model).
"""

from headwater.connectors.binlog.ddl.errors import DdlParseError
from headwater.connectors.binlog.ddl.state import SchemaChange, SchemaState, TableChange, TableId, quoted_id
from headwater.connectors.binlog.ddl.statements import StatementResult, apply_statement

__all__ = ["DdlParseError", "SchemaChange", "SchemaState", "StatementResult", "TableChange", "TableId",
           "apply_statement", "quoted_id"]
