"""PostgreSQL connector: logical replication with the built-in pgoutput plugin."""
