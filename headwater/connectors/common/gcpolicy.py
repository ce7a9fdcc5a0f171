"""The cyclic garbage collector in a process that streams: full collections kept rare.

A stream's reader thread and planner make a few container objects per transaction (a `Txn` and its
message list, the GTID state after it, a `Segment`, ...) that live until the batch holding it is
planned and trimmed. With many small transactions that is hundreds of thousands of objects a second
surviving into the oldest generation, and CPython runs a full collection whenever those survivors
grow by a quarter of what the last full one found (once every 10 collections of the middle
generation, `gc.get_threshold()[2]`): each one walks every object the process tracks (the imported
modules' too). Streaming 100k single-row MariaDB transactions, the driver's reader thread and
planner spent ~1.25 s of their ~2.3 s of CPU in ~14 such collections (`gc.callbacks`), the same with
PostgreSQL's protocol messages.

`streaming_process()`, called when a planner is made (the Spark source runner on the driver, or the
in-process engine), does once per process what the task workers' `workergc.settle()` does: collect
and freeze (`gc.freeze`) what start-up left (the imports), so no later collection walks them again,
and considers a full collection after 100 collections of the middle generation rather than 10 (the
young generations are still collected as often: garbage that is not a cycle is freed by its reference
count anyway). A process whose thresholds were set otherwise keeps them.
"""

from __future__ import annotations

import gc

DEFAULT_THRESHOLDS = (700, 10, 10)  # CPython's
FULL_EVERY = 100  # middle-generation collections between full ones considered (CPython: 10)

_done = False


def streaming_process() -> None:
    """Once per process: freeze what start-up left and make full collections rarer."""
    global _done
    if _done:
        return
    _done = True
    if gc.get_threshold() != DEFAULT_THRESHOLDS or not gc.isenabled():
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(DEFAULT_THRESHOLDS[0], DEFAULT_THRESHOLDS[1], FULL_EVERY)
