"""The MariaDB benchmark data set and loads: `bench.t` shaped like PostgreSQL's `public.t`, and what a contender is handed.

    id     bigint        primary key (AUTO_INCREMENT, so the latency load can omit it)
    name   text          concat('customer ', md5(id))      (41 characters)
    qty    int           a spread of small numbers          (the latency load marks rows with it)
    price  decimal(12,2) 0.00 .. 99999.99
    ts     timestamp(6)  microsecond precision              (commit time, in the latency load)
    flag   boolean

Rows are generated server-side from the Sequence engine (`seq_1_to_N`), the same values as
`bench.data.row_select`. The cases:

- `SnapshotCase`: the loaded, warmed table; read every row as an initial snapshot would.
- `StreamCase`: the binlog range of the load, from (`start_file`, `start_pos`) to (`end_file`,
  `end_pos`); the server's binlog holds only the schema set-up before it, so a reader starting at
  the oldest binlog file (`snapshot.mode: never`) reads the set-up's DDL and then exactly the load.
- `LatencyCase`: start the consumer, then `run_load(ready)` (as `bench.cases.LatencyCase`: WARMUP
  rows until `ready()`, WARMUP rows at the steady rate for `warmup_seconds`, the LOAD rows, one
  SENTINEL row), paced by a stored procedure in the server, each row carrying `sysdate(6)` in `ts`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cases import latency_measurement, wait_until_streaming
from bench.data import LOAD, SENTINEL, WARMUP, SteadyLoad
from bench.measure import Measurement

DBNAME = "bench"
TABLE = "t"

CREATE_TABLE = f"""
CREATE TABLE {TABLE} (
    id    bigint        NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name  text          NOT NULL,
    qty   int           NOT NULL,
    price decimal(12,2) NOT NULL,
    ts    timestamp(6)  NOT NULL,
    flag  boolean       NOT NULL
)"""


def row_values(g: str) -> str:
    """The column values of row `g` (an SQL expression), matching `bench.data.row_select`."""
    return (f"{g}, concat('customer ', md5({g})), ({g} * 7919) % 100000, round((({g} * 104729) % 10000000) / 100.0, 2), "
            f"timestamp'2024-01-01 00:00:00' + interval ({g} * 1234567) microsecond, {g} % 3 = 0")


# Created with sql_log_bin=0: the binlog holds the table's DDL and the loads' rows, not the procedures' bodies.
PROCEDURES = f"""
SET SESSION sql_log_bin = 0;
DELIMITER //
CREATE PROCEDURE bench_insert_singles(first bigint, n bigint)
BEGIN
    DECLARE i bigint DEFAULT first;
    WHILE i < first + n DO
        INSERT INTO {TABLE} VALUES ({row_values('i')});
        SET i = i + 1;
    END WHILE;
END //
CREATE PROCEDURE bench_steady(kind int, rate double, seconds double)
BEGIN
    DECLARE started double DEFAULT unix_timestamp(sysdate(6));
    DECLARE elapsed double DEFAULT 0;
    DECLARE n bigint DEFAULT 0;
    WHILE elapsed < seconds DO
        WHILE n < elapsed * rate DO
            INSERT INTO {TABLE} (name, qty, price, ts, flag) VALUES ('latency probe', kind, 1.00, sysdate(6), true);
            SET n = n + 1;
        END WHILE;
        DO sleep(0.001);
        SET elapsed = unix_timestamp(sysdate(6)) - started;
    END WHILE;
END //
DELIMITER ;
"""


def new_server(**settings: str) -> Any:
    """A fresh MariaDB server with the `bench` database, the table and the load procedures."""
    from headwater.devservers.mariadb import MariaDBServer

    server = MariaDBServer(settings=dict(settings)).start()
    try:
        server.create_database(DBNAME)
        server.execute(CREATE_TABLE, DBNAME)
        server.execute(PROCEDURES, DBNAME)
    except BaseException:
        server.stop()
        raise
    return server


def text_bytes(server: Any, first: int = 1) -> int:
    """The rows' size as tab-separated text (what COPY text would be), for MB/s."""
    got = server.scalar(
        f"SELECT sum(length(concat_ws('\\t', id, name, qty, price, ts, if(flag, 't', 'f'))) + 1) "
        f"FROM {TABLE} WHERE id >= {first}", DBNAME)
    return int(float(got or 0))


def load_rows(server: Any, rows: int) -> None:
    """`rows` rows (ids 1..rows) in one transaction: one INSERT ... SELECT from the Sequence engine."""
    server.execute(f"INSERT INTO {TABLE} SELECT {row_values('seq')} FROM seq_1_to_{rows}", DBNAME)


def load_singles(server: Any, rows: int) -> None:
    """`rows` rows (ids 1..rows), each its own transaction (autocommit in a procedure)."""
    server.execute(f"CALL bench_insert_singles(1, {rows})", DBNAME)


def master_position(server: Any) -> tuple[str, int]:
    row = server.query("SHOW MASTER STATUS")[0]
    return str(row[0]), int(row[1])


def count(server: Any, kind: int) -> int:
    return int(server.scalar(f"SELECT count(*) FROM {TABLE} WHERE qty = {kind}", DBNAME) or 0)


def steady_load(server: Any, rate: float, seconds: float, kind: int = LOAD) -> SteadyLoad:
    """Single-row transactions at `rate` per second for `seconds`, paced in the server (`bench_steady`)."""
    before = count(server, kind)
    started = time.time()
    server.execute(f"CALL bench_steady({kind}, {rate}, {seconds})", DBNAME)
    took = time.time() - started
    rows = count(server, kind) - before
    return SteadyLoad(rows, took, rate, rows / took if took else 0.0, "bench_steady procedure")


def insert_marker(server: Any, kind: int) -> None:
    server.execute(f"INSERT INTO {TABLE} (name, qty, price, ts, flag) VALUES ('marker', {kind}, 0, sysdate(6), false)",
                   DBNAME)


@dataclass
class SnapshotCase:
    server: Any  # headwater.devservers.mariadb.MariaDBServer
    rows: int
    data_bytes: int
    workdir: Path
    dbname: str = DBNAME
    table: str = TABLE


@dataclass
class StreamCase:
    server: Any
    rows: int
    transactions: int
    data_bytes: int
    workdir: Path
    files: list[str]
    start_file: str
    start_pos: int
    end_file: str
    end_pos: int
    dbname: str = DBNAME
    table: str = TABLE


@dataclass
class LatencyCase:
    server: Any
    rate: float
    seconds: float
    workdir: Path
    warmup_seconds: float = 10.0
    ready_timeout: float = 180.0
    dbname: str = DBNAME
    table: str = TABLE
    load: SteadyLoad | None = field(default=None)

    def run_load(self, ready: Callable[[], bool]) -> SteadyLoad:
        """WARMUP rows until `ready()` and for `warmup_seconds` at the steady rate, the LOAD rows, the SENTINEL."""
        wait_until_streaming(ready, lambda: insert_marker(self.server, WARMUP), self.ready_timeout)
        if self.warmup_seconds > 0:
            steady_load(self.server, self.rate, self.warmup_seconds, WARMUP)
        self.load = steady_load(self.server, self.rate, self.seconds, LOAD)
        insert_marker(self.server, SENTINEL)
        return self.load

    def latency_measurement(self, contender: str, latencies_ms: list[float], peak_rss_bytes: int | None,
                            **details: object) -> Measurement:
        return latency_measurement(contender, latencies_ms, peak_rss_bytes, self.rate, self.load, **details)
