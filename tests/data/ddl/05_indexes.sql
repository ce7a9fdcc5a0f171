-- CREATE INDEX / DROP INDEX, and the primary key Debezium derives from a UNIQUE index over NOT NULL columns.

CREATE TABLE i1 (id INT NOT NULL, title VARCHAR(64), code CHAR(4) NOT NULL, n INT)

CREATE INDEX idx_title ON i1 (title)

CREATE INDEX idx_title_prefix ON i1 (title(10) DESC)

CREATE UNIQUE INDEX u_code ON i1 (code)

CREATE UNIQUE INDEX u_n ON i1 (n)

DROP INDEX idx_title ON i1

DROP INDEX IF EXISTS idx_nope ON i1

CREATE INDEX IF NOT EXISTS idx_title_prefix ON i1 (title)

CREATE OR REPLACE INDEX idx_n ON i1 (n)

CREATE INDEX idx_multi USING BTREE ON i1 (id, code) COMMENT 'several'

CREATE FULLTEXT INDEX ft_title ON i1 (title)

CREATE TABLE i2 (id INT NOT NULL, g POINT NOT NULL)

CREATE SPATIAL INDEX sp_g ON i2 (g)

CREATE UNIQUE INDEX u_id ON i2 (id)

CREATE TABLE i3 (a INT NOT NULL, b INT NOT NULL, c INT)

CREATE UNIQUE INDEX u_ab ON i3 (a, b)

CREATE UNIQUE INDEX u_c ON i3 (c)

ALTER TABLE i3 ADD PRIMARY KEY (c)

CREATE INDEX idx_online ON i3 (b) ALGORITHM = INPLACE LOCK = NONE

CREATE TABLE hw_ddl_other.i4 (a INT NOT NULL)

CREATE UNIQUE INDEX u_a ON hw_ddl_other.i4 (a)

-- divergent: as Debezium, the key taken from a UNIQUE index stays when the index is dropped
DROP INDEX u_a ON hw_ddl_other.i4

CREATE INDEX ix_a ON hw_ddl_other.i4 (a)
