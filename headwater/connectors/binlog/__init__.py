"""What the MySQL and MariaDB connectors share: the binlog, schema history and their type system.

`connectors/mysql/` and `connectors/mariadb/` hold only what differs between the two servers
(GTID formats, the source block's connector name, properties), as Debezium's connectors are thin
layers over its `debezium-connector-binlog` module.
"""
