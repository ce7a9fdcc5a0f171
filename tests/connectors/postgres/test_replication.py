"""The replication reader's spill directory (no server): made only when a transaction is spilled, so a
reader that never spills, or is never closed, leaves nothing in the temporary directory."""

from __future__ import annotations

import os
import tempfile

from headwater.connectors.postgres.connection import ConnectionParams
from headwater.connectors.postgres.replication import ReplicationReader


def test_a_reader_makes_its_spill_directory_only_when_it_spills(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    reader = ReplicationReader(ConnectionParams("127.0.0.1", 1, "u", None, "db"), "slot", "pub")
    assert os.path.dirname(reader.spill_dir) == str(tmp_path)
    assert os.path.basename(reader.spill_dir).startswith("headwater-spill-")
    assert list(tmp_path.iterdir()) == []  # nothing made yet
    reader.close()
    assert list(tmp_path.iterdir()) == []
