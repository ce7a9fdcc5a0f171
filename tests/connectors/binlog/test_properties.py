"""The MySQL and MariaDB connectors' properties: Debezium's names accepted, what is not built refused by name,
and a bad configuration refused by `headwater run` with exit status 2 before anything connects."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from headwater.config import ConfigErrors
from headwater.connectors.registry import validate_connector

BASE = {"database.hostname": "127.0.0.1", "database.user": "u", "database.password": "pw-secret",
        "database.server.id": "5401", "topic.prefix": "ref"}


def props(connector: str, **extra: str) -> dict[str, str]:
    return {"connector.class": connector, **BASE, **{k.replace("__", "."): v for k, v in extra.items()}}


def errors(connector: str, **extra: str) -> dict[str, str]:
    with pytest.raises(ConfigErrors) as info:
        validate_connector(props(connector, **extra))
    return {e.property: f"{e.message} | {e.hint}" for e in info.value.errors}


@pytest.mark.parametrize("name", ["mariadb", "mysql", "io.debezium.connector.mariadb.MariaDbConnector",
                                  "io.debezium.connector.mysql.MySqlConnector", "MariaDB"])
def test_names_and_defaults(name):
    cfg = validate_connector(props(name))
    assert cfg.connector in ("mariadb", "mysql")
    assert cfg["database.port"] == 3306
    assert cfg["snapshot.mode"] == "initial"
    assert cfg["snapshot.locking.mode"] is None  # not set: the lock-free snapshot (lockfree.py)
    assert cfg["time.precision.mode"] == "adaptive_time_microseconds"
    assert cfg["bigint.unsigned.handling.mode"] == "long"
    assert cfg["include.schema.changes"] is True and cfg["include.query"] is False


@pytest.mark.parametrize("mode", ["initial", "initial_only", "when_needed", "never", "no_data", "recovery", "always"])
def test_snapshot_modes_of_debezium_3(mode):
    assert validate_connector(props("mariadb", snapshot__mode=mode))["snapshot.mode"] == mode


def test_old_snapshot_mode_names_are_read_as_their_new_ones():
    assert validate_connector(props("mariadb", snapshot__mode="schema_only"))["snapshot.mode"] == "no_data"
    assert validate_connector(props("mysql", snapshot__mode="schema_only_recovery"))["snapshot.mode"] == "recovery"


def test_server_id_is_required_and_numeric():
    p = props("mariadb")
    del p["database.server.id"]
    with pytest.raises(ConfigErrors) as info:
        validate_connector(p)
    assert [e.property for e in info.value.errors] == ["database.server.id"]
    assert "database.server.id" in errors("mariadb", database__server__id="abc")


def test_what_is_not_built_is_refused_by_name():
    found = errors("mariadb", snapshot__locking__mode="minimal_percona", database__jdbc__driver="x",
                   connect__keep__alive="true", snapshot__mode="custom",
                   gtid__source__includes="a.*", database__ssl__mode="verify-ca")
    assert set(found) == {"snapshot.locking.mode", "database.jdbc.driver", "connect.keep.alive", "snapshot.mode",
                          "gtid.source.includes", "database.ssl.mode"}
    assert "Percona" in found["snapshot.locking.mode"]
    assert "PyMySQL" in found["database.jdbc.driver"]


@pytest.mark.parametrize("connector", ["mariadb", "mysql"])
def test_signals_and_incremental_snapshots_take_debeziums_properties(connector):
    cfg = validate_connector(props(connector, signal__data__collection="inventory.dbz_signal",
                                   signal__enabled__channels="source,file", incremental__snapshot__chunk__size="100",
                                   incremental__snapshot__watermarking__strategy="insert_delete",
                                   notification__enabled__channels="log"))
    assert cfg["signal.data.collection"] == "inventory.dbz_signal" and cfg["incremental.snapshot.chunk.size"] == 100
    assert validate_connector(props(connector, read__only="true"))["read.only"] is True
    found = errors(connector, read__only="true", headwater__incremental__snapshot__read__only="false",
                   incremental__snapshot__allow__schema__changes="true", signal__data__collection="no_dot",
                   signal__enabled__channels="kafka")
    assert set(found) == {"headwater.incremental.snapshot.read.only", "incremental.snapshot.allow.schema.changes",
                          "signal.data.collection", "signal.enabled.channels"}
    assert "read.only" in found["headwater.incremental.snapshot.read.only"]


def test_the_signalling_table_is_captured_too():
    from headwater.connectors.common.signals import with_signal_table

    cfg = with_signal_table(validate_connector(props("mariadb", signal__data__collection="ops.dbz_signal",
                                                     database__include__list="shop",
                                                     table__include__list="shop.orders")), "database.include.list")
    assert cfg["database.include.list"] == ["shop", "ops"]
    assert cfg["table.include.list"] == ["shop.orders", "ops\\.dbz_signal"]
    same = validate_connector(props("mariadb", signal__data__collection="shop.dbz_signal", database__include__list="shop"))
    assert with_signal_table(same, "database.include.list") is same


def test_mysql_takes_gtid_source_filters_but_not_both():
    cfg = validate_connector(props("mysql", gtid__source__includes="3e11.*"))
    assert cfg["gtid.source.includes"]
    assert "gtid.source.includes / gtid.source.excludes" in errors(
        "mysql", gtid__source__includes="a", gtid__source__excludes="b")


def test_include_and_exclude_lists_together_are_refused():
    assert "database.include.list / database.exclude.list" in errors(
        "mariadb", database__include__list="a", database__exclude__list="b")


def test_headwater_run_exits_2_on_a_bad_configuration(tmp_path):
    cfg = {"name": "x", "source": props("mariadb", snapshot__locking__mode="sometimes", database__port="99999"),
           "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
           "spark": {"checkpoint": str(tmp_path / "ckpt")}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "headwater.cli.main", "run", str(path), "--once"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "snapshot.locking.mode" in proc.stderr and "database.port" in proc.stderr
    assert "pw-secret" not in proc.stderr + proc.stdout


def test_configuration_based_takes_its_properties():
    cfg = validate_connector(props("mariadb", snapshot__mode="configuration_based",
                                   snapshot__mode__configuration__based__snapshot__data="true"))
    assert cfg["snapshot.mode.configuration.based.snapshot.data"] is True
    assert cfg["snapshot.mode.configuration.based.start.stream"] is False
    assert "snapshot.mode.configuration.based.start.stream" in errors(
        "mysql", snapshot__mode__configuration__based__start__stream="maybe")


def test_a_spark_worker_validating_and_unpickling_a_mariadb_work_units_context_imports_no_ddl_parser():
    """Every Python process of a Spark pipeline validates the properties, and task workers unpickle the
    connector's context with each work unit: neither may import the DDL parser, sqlglot or the driver-side
    source (~0.1 s of each process's start, on the first batch's critical path)."""
    import pickle

    from headwater.connectors.mariadb.context import MariaDbContext

    cfg = validate_connector(props("mariadb"))
    context = pickle.dumps(MariaDbContext.from_config(cfg))
    heavy = ("sqlglot", "headwater.connectors.binlog.ddl", "headwater.connectors.binlog.source",
             "headwater.connectors.mariadb.source")
    code = ("import pickle, sys\n"
            "from headwater.connectors.registry import validate_connector\n"
            f"validate_connector({props('mariadb')!r})\n"
            "ctx = pickle.loads(sys.stdin.buffer.read())\n"
            "print(type(ctx).connector, *[m for m in " + repr(heavy) + " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], input=context, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.decode().split() == ["mariadb"]
