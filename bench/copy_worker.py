"""Child process for the psycopg2 COPY baseline: COPY ... TO STDOUT into a counting writer.

    python -m bench.copy_worker DSN SQL

Prints one JSON object: bytes and rows received, and the epoch times of the start of the COPY,
its first chunk and its end. It runs as its own process so that its peak memory is measured alone.
"""

from __future__ import annotations

import json
import sys
import time

import psycopg2


class CountingSink:
    """A file-like object that counts what psycopg2 writes to it and keeps nothing."""

    def __init__(self) -> None:
        self.bytes = 0
        self.rows = 0
        self.first: float | None = None

    def write(self, data: bytes) -> int:
        if self.first is None:
            self.first = time.time()
        self.bytes += len(data)
        self.rows += data.count(b"\n")
        return len(data)


def main(argv: list[str]) -> None:
    dsn, sql = argv
    conn = psycopg2.connect(dsn)
    sink = CountingSink()
    started = time.time()
    with conn.cursor() as cur:
        cur.copy_expert(sql, sink, size=1 << 16)
    ended = time.time()
    conn.close()
    print(json.dumps({"bytes": sink.bytes, "rows": sink.rows, "started": started, "first": sink.first,
                      "ended": ended}))


if __name__ == "__main__":
    main(sys.argv[1:])
