"""The MySQL connector: the binlog connector with MySQL's GTID sets (`uuid:interval`) and names."""
