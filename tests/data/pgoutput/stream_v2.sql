-- stream_v2: pgoutput options {"publication_names": "headwater_pub", "messages": "true", "proto_version": "2", "streaming": "on"}
-- schema (before the slot)
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text, mood mood, balance numeric(10,2), created timestamptz DEFAULT '2024-01-02 03:04:05+00');
CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE TABLE audit (id int, note text);
ALTER TABLE audit REPLICA IDENTITY FULL;
CREATE TABLE accounts (id int PRIMARY KEY, code text NOT NULL, owner text);
CREATE UNIQUE INDEX accounts_code ON accounts (code);
ALTER TABLE accounts REPLICA IDENTITY USING INDEX accounts_code;
CREATE TABLE parent (id serial PRIMARY KEY);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent (id));
CREATE TABLE events (id int PRIMARY KEY, payload text);
CREATE TABLE kinds (id int PRIMARY KEY, i2 smallint, i8 bigint, f8 float8, num numeric, flag bool, t text, ts timestamptz, d date, u uuid, j jsonb, arr int[], raw bytea, m mood, nothing text);
CREATE TABLE not_published (id int);
CREATE PUBLICATION headwater_pub FOR TABLE customers, docs, audit, accounts, parent, child, events, kinds;
SELECT pg_replication_origin_create('headwater_origin');
-- workload (slot record_stream_v2 created first)
-- a
BEGIN;
-- a
INSERT INTO events SELECT g, repeat(md5(g::text), 3) FROM generate_series(1, 300) g;
-- b
INSERT INTO customers (id, name) VALUES (100, 'interleaved');
-- a
SELECT pg_logical_emit_message(true, 'headwater.stream', 'inside a streamed transaction');
-- a
UPDATE events SET payload = 'updated' WHERE id <= 2;
-- a
DELETE FROM events WHERE id = 3;
-- a
INSERT INTO audit VALUES (7, 'seven');
-- a
TRUNCATE audit;
-- a
SAVEPOINT s1;
-- a
INSERT INTO events SELECT g, repeat(md5(g::text), 3) FROM generate_series(1001, 1300) g;
-- a
ROLLBACK TO SAVEPOINT s1;
-- a
INSERT INTO events VALUES (2001, 'after the savepoint');
-- b
BEGIN;
-- b
INSERT INTO customers (id, name) VALUES (101, 'small, commits after the big one');
-- a
COMMIT;
-- b
COMMIT;
-- c
SELECT pg_replication_origin_session_setup('headwater_origin');
-- c
BEGIN;
-- c
INSERT INTO events SELECT g, repeat(md5(g::text), 3) FROM generate_series(3001, 3300) g;
-- c
ROLLBACK;
-- c
SELECT pg_replication_origin_session_reset();
-- a
INSERT INTO events VALUES (4001, 'small, not streamed');
-- a
SELECT pg_logical_emit_message(false, 'headwater.end', 'done');
