"""An interleaved A/B of what Debezium 3's context headers cost the engine: its snapshot of the benchmark
table (JSON rows, the engine's default output) with and without `extended.headers.enabled`, three runs
each (order alternating), this process's CPU time and the wall time of each.

    .venv/bin/python -m bench.context_headers_ab [ROWS]      # default 1,000,000

CPU time compares the two on a loaded machine better than wall time; the best of each is printed last.
"""

from __future__ import annotations

import json
import sys
import time

from bench import data
from headwater.connectors.registry import validate_connector
from headwater.devservers.postgres import PostgresServer
from headwater.engine import Engine
from headwater.events.typed import TypedEvents


def snapshot(server: PostgresServer, slot: str, headers: bool) -> tuple[int, int, float, float]:
    """(rows, header entries, CPU s, wall s) of one engine snapshot with or without the headers."""
    props = {"connector.class": "postgres", **server.connector_properties(data.DBNAME), "topic.prefix": "bench",
             "table.include.list": f"public.{data.TABLE}", "slot.name": slot, "publication.name": data.PUBLICATION,
             "publication.autocreate.mode": "disabled", "snapshot.mode": "initial_only",
             "extended.headers.enabled": str(headers).lower()}
    engine = Engine(validate_connector(props))
    cpu, wall = time.process_time(), time.time()
    rows = entries = 0
    try:
        for batch in engine.batches(once=True):
            assert not isinstance(batch, TypedEvents)  # the engine's default output is JSON rows
            arrow = batch.to_arrow()
            rows += arrow.num_rows
            entries += len(arrow.column("headers").values)
    finally:
        engine.close()
    return rows, entries, time.process_time() - cpu, time.time() - wall


def main() -> int:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    server = data.new_server()
    try:
        data.load_snapshot_table(server, rows)
        best: dict[bool, tuple[float, float]] = {}
        for rep in range(3):
            for headers in (True, False) if rep % 2 == 0 else (False, True):
                slot = f"ab_{int(headers)}_{rep}"
                n, entries, cpu, wall = snapshot(server, slot, headers)
                data.drop_slot(server, slot)
                print(json.dumps({"headers": headers, "rep": rep, "rows": n, "header_entries": entries,
                                  "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}), flush=True)
                old = best.get(headers, (cpu, wall))
                best[headers] = (min(old[0], cpu), min(old[1], wall))
        for headers, (cpu, wall) in best.items():
            print(f"context headers {'on' if headers else 'off'}: best CPU {cpu:.2f} s, best wall {wall:.2f} s")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
