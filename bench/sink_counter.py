"""The benchmark driver's count of a jsonl sink's events, in a process of its own at the lowest CPU priority.

`bench/headwater_driver.py` is Spark's driver process too: counting the lines of the files the sink
commits (~0.5 µs of CPU a line on the 2-core machine, with the GIL held) there took CPU from the
pipeline it measures and held up the batch commits that run in that process. So the driver lists the
sink every 50 ms and notes when each file appeared (all of a file's events had arrived by then), and
this process, at nice 19, counts them: while the pipeline keeps the cores busy the counts come late,
but the times they are booked at do not move.

    python bench/sink_counter.py [--incremental]   (sink file paths on stdin, one a line; "NAME COUNT" lines out)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

TOMBSTONE = b'"value":null}\n'
INCREMENTAL = b'"snapshot":"incremental"'


def count_events(path: Path, chunk_bytes: int = 1 << 22, incremental: bool = False) -> int:
    """The lines of a sink file that are not tombstones (with `incremental`, the events of an incremental
    snapshot), read a chunk at a time: the counter's memory stays small (it is sampled with headwater's),
    however large a batch's file."""
    needles = (INCREMENTAL,) if incremental else (b"\n", TOMBSTONE)
    counts = [0] * len(needles)
    tails = [b""] * len(needles)  # a needle's end may be in the next chunk: its first bytes carried over
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            for i, needle in enumerate(needles):
                data = tails[i] + chunk
                counts[i] += data.count(needle)
                tails[i] = data[max(0, len(data) - len(needle) + 1):]
    return counts[0] if incremental else counts[0] - counts[1]


class SinkCounter:
    """The counting process, seen from the driver: `count(path)` hands it a file, `counted()` returns the
    (file name, events) it has finished since the last call, without waiting."""

    def __init__(self, incremental: bool = False) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, *(["--incremental"] if incremental else [])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        os.set_blocking(self.stdout.fileno(), False)
        self.buffer = b""
        self.sent = self.received = 0

    def count(self, path: Path) -> None:
        self.stdin.write(os.fsencode(path) + b"\n")
        self.stdin.flush()
        self.sent += 1

    def counted(self) -> list[tuple[str, int]]:
        with contextlib.suppress(BlockingIOError):  # nothing counted since the last call
            self.buffer += os.read(self.stdout.fileno(), 1 << 16)
        *lines, self.buffer = self.buffer.split(b"\n")
        self.received += len(lines)
        if self.proc.poll() is not None and self.received < self.sent and not self.buffer:
            raise RuntimeError(f"the sink counter ended (exit {self.proc.returncode}) with files uncounted")
        return [(name.decode(), int(n)) for name, n in (line.rsplit(b" ", 1) for line in lines)]

    def finish(self, timeout: float = 120.0) -> list[tuple[str, int]]:
        """The counts of every file handed over and not returned yet (waiting for them), then the process ends."""
        self.stdin.close()
        os.set_blocking(self.stdout.fileno(), True)
        rest = self.buffer + self.stdout.read()
        self.proc.wait(timeout=timeout)
        self.buffer = b""
        lines = [line for line in rest.split(b"\n") if line]
        return [(name.decode(), int(n)) for name, n in (line.rsplit(b" ", 1) for line in lines)]


def main() -> int:
    os.nice(19)
    incremental = "--incremental" in sys.argv[1:]
    for line in sys.stdin.buffer:
        path = Path(os.fsdecode(line.rstrip(b"\n")))
        sys.stdout.buffer.write(f"{path.name} {count_events(path, incremental=incremental)}\n".encode())
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
