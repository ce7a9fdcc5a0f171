"""The `jdbc` sink: Debezium's JDBC sink connector in Python, keeping tables of PostgreSQL, MariaDB
and MySQL in step with the captured ones (`config` its properties, `types` the type mapping,
`dialects` the SQL of each database, `connection` the drivers, `writer` a batch applied exactly
once, `spark` the wiring into a streaming query)."""
