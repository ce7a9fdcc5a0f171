"""The MariaDB benchmark's loads and limits on a real throwaway MariaDB: what they put in the table and the binlog."""

from __future__ import annotations

import hashlib

import pytest

from bench import mariadb
from bench import mariadb_data as md
from bench.data import LOAD


@pytest.fixture(scope="module")
def server():
    s = md.new_server()
    yield s
    s.stop()


def binlog_statements(server) -> list[str]:
    return [str(row[5]) for f in server.binlog_files() for row in server.query(f"SHOW BINLOG EVENTS IN '{f}'")]


def test_rows_as_postgres_generates_them(server):
    server.execute(f"TRUNCATE {md.TABLE}", md.DBNAME)
    md.load_rows(server, 1000)
    assert server.scalar(f"SELECT count(*) FROM {md.TABLE}", md.DBNAME) == "1000"
    row = server.query(f"SELECT name, qty, price, ts, flag FROM {md.TABLE} WHERE id = 7", md.DBNAME)[0]
    # bench.data.row_select for g = 7: md5 of the text, 7 * 7919 % 100000, 7 * 104729 % 10^7 / 100, 7 * 1.234567 s
    assert row == (f"customer {hashlib.md5(b'7').hexdigest()}", "55433", "7331.03", "2024-01-01 00:00:08.641969", "0")
    assert md.text_bytes(server) > 1000 * 80


def test_the_binlog_holds_the_table_ddl_not_the_procedures(server):
    statements = " ".join(binlog_statements(server))
    assert "CREATE TABLE t" in statements
    assert "PROCEDURE" not in statements


def test_single_row_transactions_each_commit(server):
    server.execute(f"TRUNCATE {md.TABLE}", md.DBNAME)
    before = int(server.gtid_binlog_pos().rsplit("-", 1)[1])
    start_file, start_pos = md.master_position(server)
    md.load_singles(server, 200)
    assert int(server.gtid_binlog_pos().rsplit("-", 1)[1]) - before == 200
    end_file, end_pos = md.master_position(server)
    assert (end_file, end_pos) > (start_file, start_pos)


def test_steady_load_keeps_its_rate(server):
    load = md.steady_load(server, 400.0, 2.0)
    assert 720 <= load.rows <= 820, load
    assert md.count(server, LOAD) == load.rows
    lag = server.scalar(f"SELECT max(timestampdiff(MICROSECOND, ts, sysdate(6))) FROM {md.TABLE} WHERE qty = {LOAD}",
                        md.DBNAME)
    assert lag is not None and int(lag) < 60_000_000


def test_the_dump_limits_run_and_clean_up(server, tmp_path):
    server.execute(f"TRUNCATE {md.TABLE}", md.DBNAME)
    md.load_rows(server, 5000)
    case = md.SnapshotCase(server, 5000, md.text_bytes(server), tmp_path)
    for measure in (mariadb.dump_quick, mariadb.dump_outfile):
        m = measure(case)
        assert m.ok and m.rows == 5000 and m.seconds, m.note
    assert not list((server.root / "tmp").glob("outfile-*"))
