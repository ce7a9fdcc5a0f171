"""A task worker freezes what its imports made, once per batch of new imports, after collecting the
task's garbage (in a fresh interpreter: freezing is for the whole process)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import gc, sys, weakref
from headwater.spark.workergc import settle

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle the task left behind: collected, not frozen
gone = weakref.ref(a)
del a, b
settle()
assert gone() is None, "the task's cyclic garbage was frozen"
frozen = gc.get_freeze_count()
assert frozen > 1000, frozen  # the imports' objects (pyspark's, headwater's) are out of the collections
settle()
assert gc.get_freeze_count() == frozen  # nothing imported since: nothing more to do
import json.tool  # noqa: F401  (a module imported by a later task)
settle()
assert gc.get_freeze_count() > frozen
print("ok")
"""


def test_settle_freezes_after_imports_only_and_never_freezes_garbage():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
