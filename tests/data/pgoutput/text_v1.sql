-- text_v1: pgoutput options {"publication_names": "headwater_pub", "messages": "true", "proto_version": "1"}
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
-- workload (slot record_text_v1 created first)
-- a
BEGIN;
-- a
INSERT INTO customers (id, name, email, mood, balance) VALUES (1, 'Alice', 'alice@example.com', 'happy', 10.50), (2, 'Zoë ✓ "quoted" \ back', NULL, 'ok', -3), (3, E'multi\nline\ttab', 'c@example.com', NULL, NULL);
-- a
COMMIT;
-- a
UPDATE customers SET balance = 99.99 WHERE id = 1;
-- a
UPDATE customers SET id = 20 WHERE id = 2;
-- a
DELETE FROM customers WHERE id = 3;
-- a
INSERT INTO docs VALUES (1, 'first', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 94) g));
-- a
UPDATE docs SET title = 'renamed' WHERE id = 1;
-- a
INSERT INTO audit VALUES (1, 'one'), (2, NULL);
-- a
UPDATE audit SET note = 'uno' WHERE id = 1;
-- a
DELETE FROM audit WHERE id = 2;
-- a
INSERT INTO accounts VALUES (1, 'ACC-1', 'alice');
-- a
UPDATE accounts SET owner = 'bob' WHERE id = 1;
-- a
UPDATE accounts SET code = 'ACC-2' WHERE id = 1;
-- a
DELETE FROM accounts WHERE id = 1;
-- a
ALTER TABLE docs REPLICA IDENTITY FULL;
-- a
UPDATE docs SET title = 'full' WHERE id = 1;
-- a
INSERT INTO parent DEFAULT VALUES;
-- a
INSERT INTO child VALUES (1, 1);
-- a
TRUNCATE parent RESTART IDENTITY CASCADE;
-- a
TRUNCATE audit;
-- a
TRUNCATE accounts RESTART IDENTITY;
-- a
BEGIN;
-- a
INSERT INTO customers (id, name) VALUES (4, 'Dave');
-- a
SELECT pg_logical_emit_message(true, 'headwater.test', 'transactional hello');
-- a
SELECT pg_logical_emit_message(false, 'headwater.test', 'sent at once, inside a transaction');
-- a
COMMIT;
-- a
SELECT pg_logical_emit_message(false, 'headwater.bytes', '\x00ff10'::bytea);
-- a
SELECT pg_logical_emit_message(true, 'headwater.only', 'a transaction with only a message');
-- a
BEGIN;
-- a
INSERT INTO customers (id, name) VALUES (5, 'rolled back');
-- a
SELECT pg_logical_emit_message(false, 'headwater.test', 'non-transactional, then rollback');
-- a
ROLLBACK;
-- a
INSERT INTO not_published VALUES (1);
-- a
TRUNCATE not_published;
-- b
SELECT pg_replication_origin_session_setup('headwater_origin');
-- b
BEGIN;
-- b
SELECT pg_replication_origin_xact_setup('0/ABCDEF0', '2024-05-06 07:08:09+00');
-- b
INSERT INTO customers (id, name) VALUES (6, 'from origin');
-- b
COMMIT;
-- b
SELECT pg_replication_origin_session_reset();
-- a
SELECT pg_logical_emit_message(false, 'headwater.end', 'done');
