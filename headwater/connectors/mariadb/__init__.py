"""The MariaDB connector: the binlog connector with MariaDB's GTIDs (`domain-server-sequence`) and names."""
