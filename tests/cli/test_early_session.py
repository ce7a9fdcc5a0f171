"""`headwater run` launches Spark's JVM before it validates the rest of the configuration
(`headwater.spark.session.EarlySession`): what starts it imports no connector, no transformation chain,
no NumPy or Arrow; a configuration refused still exits with status 2 naming the property, and the JVM
started for it does not outlive the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.spark.session import early_view

HEAVY = ("numpy", "pyarrow", "headwater.pipeline_config", "headwater.connectors.registry", "headwater.transforms",
         "headwater.spark.source")
MARK = "HEADWATER_TEST_EARLY"

GOOD: dict[str, Any] = {
    "name": "t",
    "source": {"connector.class": "postgres", "database.hostname": "127.0.0.1", "database.user": "u",
               "database.dbname": "d", "topic.prefix": "p"},
    "sink": {"type": "jsonl", "path": "out"},
    "spark": {"master": "local[1]", "checkpoint": "ckpt", "conf": {"spark.ui.enabled": "false"}},
}


def test_what_launches_the_jvm_imports_no_connector_numpy_or_arrow():
    code = ("import sys\n"
            "import headwater.cli.main\n"
            "from headwater.spark.session import early_view\n"
            f"assert early_view({GOOD!r}) is not None\n"
            f"print(*[m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == []


def test_the_early_view_is_the_spark_block_name_and_sink_type(monkeypatch):
    monkeypatch.setenv("HEADWATER_TEST_MASTER", "local[3]")
    view = early_view({**GOOD, "spark": {**GOOD["spark"], "master": "${HEADWATER_TEST_MASTER}"}})
    assert view is not None
    assert (view.name, view.sink.type, view.spark.master, view.spark.checkpoint) == ("t", "jsonl", "local[3]", "ckpt")
    default = early_view({**GOOD, "spark": None})
    assert default is not None and default.spark.master == "local[*]"  # the default block
    # not valid itself: no early start (the validation reports it)
    monkeypatch.delenv("HEADWATER_TEST_MASTER")
    assert early_view({**GOOD, "spark": {"master": "${HEADWATER_TEST_MASTER}"}}) is None
    assert early_view({**GOOD, "spark": {"mastr": "local[1]"}}) is None
    assert early_view({**GOOD, "spark": "local"}) is None
    assert early_view({**GOOD, "sink": None}) is None
    assert early_view({**GOOD, "name": None}) is None
    assert early_view(["not", "a", "mapping"]) is None


def run(tmp_path: Path, data: dict, mark: str) -> subprocess.CompletedProcess:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    return subprocess.run([sys.executable, "-m", "headwater.cli.main", "run", str(config)], capture_output=True,
                          text=True, timeout=240, cwd=tmp_path, env={**os.environ, MARK: mark})


def marked(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if f"{MARK}={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


@pytest.mark.parametrize("change, prop", [
    ({"source": {**GOOD["source"], "snapshot.mode": "sometimes"}}, "source.snapshot.mode"),  # the JVM started
    ({"spark": {**GOOD["spark"], "mastr": "local[1]"}}, "spark.mastr"),  # no JVM started
], ids=["source", "spark"])
def test_a_refused_configuration_exits_2_naming_the_property_and_leaves_no_jvm(tmp_path, change, prop):
    mark = uuid.uuid4().hex
    try:
        proc = run(tmp_path, {**GOOD, **change}, mark)
        assert proc.returncode == 2, proc.stderr
        assert "the configuration is not valid" in proc.stderr and prop in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr
        assert not (tmp_path / "ckpt").exists()  # nothing captured, no checkpoint
        deadline = time.monotonic() + 30
        while marked(mark) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not marked(mark), "a process of the refused run lives on"
    finally:
        for pid in marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
