"""The benchmark harness's memory sampling (`bench.measure`): each process's own peak PSS."""

from __future__ import annotations

import sys

from bench.measure import run_measured


def test_each_process_peak_pss_is_its_own():
    # the measured root ("driver") starts a child (`-m timeit`) that holds 200 MB of touched anonymous
    # memory for 1.5 s (PSS is sampled every 0.5 s), then frees it: the child's own peak is kept
    hold = ["-m", "timeit", "-n", "1", "-r", "1", "-s", "import time", "b = bytearray(200 << 20); time.sleep(1.5)"]
    spawn = f"import subprocess; subprocess.run([{sys.executable!r}, *{hold!r}])"
    res = run_measured([sys.executable, "-c", spawn], timeout=60)
    assert res.returncode == 0
    peaks = {name.split()[0]: v for name, v in res.pss_mb_peak_by_process.items()}
    assert peaks["timeit"]["pss"] >= 190 and peaks["timeit"]["anon"] >= 190
    assert peaks["driver"]["pss"] < 100
    assert res.pss_peak_bytes >> 20 >= peaks["timeit"]["pss"]
