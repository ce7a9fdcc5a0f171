"""The driver's py4j converters of NumPy values (no JVM: py4j's converter list and what asking it imports)."""

from __future__ import annotations

import subprocess
import sys

ASK = """
import sys
import numpy as np
from py4j import protocol
from headwater.spark.gateway import NumpyOnly, numpy_converters_asked_about_numpy_only
numpy_converters_asked_about_numpy_only()
numpy_converters_asked_about_numpy_only()  # once is enough; twice changes nothing
wrapped = [c for c in protocol.INPUT_CONVERTER if isinstance(c, NumpyOnly)]
asked = [c.can_convert("a string") or c.can_convert(3) for c in protocol.INPUT_CONVERTER]
before = "pandas" in sys.modules
array = protocol.INPUT_CONVERTER[0].can_convert(np.array([1, 2]))
print(len(wrapped), any(asked), before, array)
"""


def test_numpy_converters_are_asked_about_numpy_values_only():
    """PySpark's own converters import pandas (via pyspark.testing.utils) when asked about any argument;
    wrapped, a call with plain values leaves pandas unimported and a NumPy array still converts."""
    out = subprocess.run([sys.executable, "-c", ASK], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "False", "False", "True"]
