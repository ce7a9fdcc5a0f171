"""A streaming process (one that makes a planner) freezes what start-up left, after collecting its
garbage, and considers full collections less often, once; thresholds set otherwise are kept (each case
in a fresh interpreter: the collector's settings are the whole process's)."""

from __future__ import annotations

import subprocess
import sys

DEFAULTS = r"""
import gc, weakref
from headwater.connectors.common import gcpolicy

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle left before: collected, not frozen
gone = weakref.ref(a)
del a, b
gc.set_threshold(*gcpolicy.DEFAULT_THRESHOLDS)
gcpolicy.streaming_process()
assert gone() is None, "cyclic garbage was frozen"
frozen = gc.get_freeze_count()
assert frozen > 1000, frozen
assert gc.get_threshold() == (700, 10, gcpolicy.FULL_EVERY), gc.get_threshold()
gcpolicy.streaming_process()
assert gc.get_freeze_count() == frozen  # once per process
print("ok")
"""

CUSTOM = r"""
import gc
from headwater.connectors.common import gcpolicy

gc.set_threshold(5000, 20, 20)
gcpolicy.streaming_process()
assert gc.get_threshold() == (5000, 20, 20), gc.get_threshold()
assert gc.get_freeze_count() == 0
print("ok")
"""


def _run(script: str) -> None:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_streaming_process_freezes_start_up_and_makes_full_collections_rarer_once():
    _run(DEFAULTS)


def test_thresholds_set_otherwise_are_kept():
    _run(CUSTOM)


def test_making_a_planner_sets_the_policy():
    _run(r"""
import gc
from headwater.connectors.common.gcpolicy import DEFAULT_THRESHOLDS, FULL_EVERY
from tests.connectors.common.fakes import FakeReader, planner

gc.set_threshold(*DEFAULT_THRESHOLDS)
planner(FakeReader([]))
assert gc.get_threshold() == (700, 10, FULL_EVERY), gc.get_threshold()
assert gc.get_freeze_count() > 0
print("ok")
""")
