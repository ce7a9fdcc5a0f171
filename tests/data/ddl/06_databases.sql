-- CREATE / ALTER / DROP DATABASE and the charsets tables inherit from their database.

CREATE DATABASE hw_ddl_db3 CHARACTER SET latin1

CREATE TABLE hw_ddl_db3.t (a VARCHAR(5))

DROP DATABASE hw_ddl_db3

CREATE DATABASE IF NOT EXISTS hw_ddl_db3 DEFAULT CHARSET = utf8mb3

CREATE SCHEMA IF NOT EXISTS hw_ddl_db3

DROP SCHEMA IF EXISTS hw_ddl_db3

DROP DATABASE IF EXISTS hw_ddl_db3

ALTER DATABASE hw_ddl_other CHARACTER SET utf8mb3

CREATE TABLE hw_ddl_other.db1 (a VARCHAR(5), b TEXT)

ALTER DATABASE hw_ddl_other DEFAULT CHARACTER SET = latin1 DEFAULT COLLATE = latin1_general_ci

CREATE TABLE hw_ddl_other.db2 (a VARCHAR(5))

ALTER SCHEMA hw_ddl_other COLLATE latin1_swedish_ci

USE hw_ddl_other

ALTER DATABASE CHARACTER SET latin1

CREATE TABLE db3 (a VARCHAR(5), b ENUM('x'))

USE hw_ddl

ALTER DATABASE hw_ddl COMMENT 'the corpus database'

CREATE DATABASE hw_ddl_db4 COLLATE utf8mb4_unicode_ci

CREATE TABLE hw_ddl_db4.x (a CHAR(3))

RENAME TABLE hw_ddl_db4.x TO hw_ddl.db4x

DROP DATABASE hw_ddl_db4
