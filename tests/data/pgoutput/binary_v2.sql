-- binary_v2: pgoutput options {"publication_names": "headwater_pub", "messages": "true", "proto_version": "2", "binary": "true"}
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
-- workload (slot record_binary_v2 created first)
-- a
INSERT INTO kinds VALUES (1, -2, 9007199254740993, 1.5, 12345.678901, true, 'héllo', '2024-02-29 12:34:56.789012+00', '2024-02-29', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, 2]}', '{1,NULL,3}', '\xdeadbeef', 'sad', NULL);
-- a
UPDATE kinds SET t = 'changed' WHERE id = 1;
-- a
INSERT INTO docs VALUES (2, 'binary', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 94) g));
-- a
UPDATE docs SET title = 'still binary' WHERE id = 2;
-- a
DELETE FROM kinds WHERE id = 1;
-- a
SELECT pg_logical_emit_message(false, 'headwater.end', 'done');
