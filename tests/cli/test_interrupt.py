"""A SIGINT that PySpark's own handler turns into KeyboardInterrupt still stops `headwater run` quietly.

PySpark's SparkContext installs a SIGINT handler that raises KeyboardInterrupt; headwater installs
its own again right after the session starts. A Ctrl-C in between reaches PySpark's: the run must
end as a stop (exit 0, "stopped"), not as an error.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from headwater.cli.main import cli


def test_keyboard_interrupt_while_the_session_starts_is_a_stop(tmp_path: Path, monkeypatch) -> None:
    import headwater.spark.pipeline  # noqa: F401 - imported first, its `spark_session` stays the real one
    import headwater.spark.session as session

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(session, "spark_session", interrupted)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "name": "t",
        "source": {"connector.class": "postgres", "database.hostname": "127.0.0.1", "database.user": "u",
                   "database.dbname": "d", "topic.prefix": "p"},
        "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
        "spark": {"master": "local[1]", "checkpoint": str(tmp_path / "ckpt")},
    }))
    result = CliRunner().invoke(cli, ["run", str(config)])
    assert result.exit_code == 0, result.output
    assert "stopped" in result.output
    assert "Traceback" not in result.output
