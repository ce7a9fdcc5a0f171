"""The connector registry: lookups by short and Debezium class name, refusals, lazy loading, layering."""

from __future__ import annotations

import subprocess
import sys

import pytest

from headwater.config import ConfigErrors
from headwater.connectors import registry
from headwater.connectors.postgres.properties import PROPERTIES

BASE = {"connector.class": "postgres", "topic.prefix": "p", "database.hostname": "h",
        "database.user": "u", "database.dbname": "d"}


@pytest.mark.parametrize("value", ["postgres", "POSTGRES", " postgresql ", "pg",
                                   "io.debezium.connector.postgresql.PostgresConnector"])
def test_postgres_found_by_every_name(value):
    assert registry.lookup(value).name == "postgres"
    assert registry.validate_connector({**BASE, "connector.class": value}).connector == "postgres"


@pytest.mark.parametrize("value, name, implemented", [
    ("io.debezium.connector.mysql.MySqlConnector", "mysql", True), ("mariadb", "mariadb", True),
    ("io.debezium.connector.mariadb.MariaDbConnector", "mariadb", True),
    ("mssql", "sqlserver", False), ("mongo", "mongodb", False)])
def test_other_connectors_are_known_by_name_and_class(value, name, implemented):
    found = registry.find(value)
    assert found is not None and found.name == name and found.implemented == implemented


def test_unknown_connector_is_refused_with_the_known_names():
    with pytest.raises(ConfigErrors) as exc:
        registry.validate_connector({**BASE, "connector.class": "cassandra"})
    (err,) = exc.value.errors
    assert err.property == "connector.class" and "'cassandra'" in err.message
    for c in registry.CONNECTORS:
        assert c.name in err.hint
    assert "implemented: postgres" in err.hint


def test_class_names_are_exact_and_short_names_are_not_classes():
    assert registry.find("io.debezium.connector.postgresql.postgresconnector") is None
    assert registry.find("PostgresConnector") is None


def test_missing_and_unimplemented_connector():
    with pytest.raises(ConfigErrors) as exc:
        registry.validate_connector({k: v for k, v in BASE.items() if k != "connector.class"})
    assert exc.value.errors[0].property == "connector.class" and "is required" in exc.value.errors[0].message
    with pytest.raises(ConfigErrors) as exc:
        registry.validate_connector({**BASE, "connector.class": "io.debezium.connector.oracle.OracleConnector"})
    assert "the oracle connector is not implemented" in exc.value.errors[0].message


def test_properties_and_source_are_loaded_through_the_registry():
    pg = registry.lookup("postgres")
    assert registry.properties_of(pg) is PROPERTIES
    connector = registry.create_source(registry.validate_connector(BASE), parallelism=3)
    from headwater.connectors.postgres.source import PostgresSource

    assert isinstance(connector, PostgresSource) and connector.parallelism == 3


def test_canonical_names_restores_the_connectors_names_only():
    lowered = {k.lower(): v for k, v in {**BASE, "database.tcpKeepAlive": "false",
                                          "column.mask.hash.SHA-256.with.salt.Salt": "a.b"}.items()}
    restored = registry.canonical_names(lowered)
    assert restored["database.tcpKeepAlive"] == "false"
    assert "column.mask.hash.sha-256.with.salt.salt" in restored  # a pattern name keeps what Spark made of it
    assert registry.canonical_names({"connector.class": "cassandra", "A.B": 1}) == {"connector.class": "cassandra",
                                                                                       "A.B": 1}


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_config_imports_no_connector_and_the_registry_loads_connectors_lazily():
    loaded = _modules_after("import headwater.config, headwater.config.common, headwater.config.validation, "
                            "headwater.config.patterns, headwater.config.secrets")
    assert not {m for m in loaded if m.startswith("headwater.connectors")}
    loaded = _modules_after("import headwater.connectors.registry, headwater.connectors.base")
    assert not {m for m in loaded if m.startswith("headwater.connectors.postgres")}
