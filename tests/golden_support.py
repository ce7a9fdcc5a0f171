"""Golden files recorded from the real Debezium: loading scenarios, normalizing, comparing.

A scenario lives in ``tests/golden/<connector>/<name>/``: ``scenario.yaml`` (description,
connector properties, ``setup`` SQL run before the connector starts, ``during`` SQL run once it
streams) and ``debezium.jsonl`` (the events Debezium 3.6.3 emitted, one
``{"topic", "key", "value"}`` object a line, written by ``scripts/record_debezium.py``).

Two runs on two servers differ in wall-clock fields and in positions (LSNs, transaction ids).
``normalize`` drops the former and replaces the latter by symbolic tokens given in order of
first appearance (``L1, L2, ...`` for LSNs, ``C1, C2, ...`` for the commit LSNs in
``source.sequence`` and transaction END ids, ``X1, X2, ...`` for transaction ids), so the
equality relations between events (same transaction, same position) are still compared.
``assert_events_equal`` normalizes both sides and fails with a readable diff.

``run_psql_script`` runs a scenario's SQL the way the recorder did (``psql -f``, one implicit
transaction per statement, psql meta-commands such as ``\\!`` allowed, with ``PGHOST``,
``PGPORT``, ``PGUSER``, ``PGPASSWORD``, ``PGDATABASE`` set so that a script can start a
second ``psql`` session in the background).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

GOLDEN_ROOT = Path(__file__).resolve().parent / "golden"

#: Envelope-level (and transaction-topic / heartbeat) fields carrying the processing time.
WALL_CLOCK_FIELDS = ("ts_ms", "ts_us", "ts_ns")
#: ``source`` fields that differ between runs and are not compared at all.
SOURCE_DROPPED_FIELDS = ("ts_ms", "ts_us", "ts_ns", "version")

_TX_ID = re.compile(r"^(\d+):(\d+)$")
_DIGITS = re.compile(r"\d+")


# --------------------------------------------------------------------------------------------
# Scenarios


@dataclass
class Scenario:
    """One recorded scenario: what it does and what Debezium emitted for it."""

    name: str
    path: Path
    description: str
    properties: dict[str, str]
    setup: str
    during: str | None
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def has_golden(self) -> bool:
        """Whether ``debezium.jsonl`` has been recorded."""
        return (self.path / "debezium.jsonl").exists()


def property_text(value: Any) -> str:
    """A YAML property value as the string Debezium expects (``true``, not ``True``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    """The events of a JSON-lines file (blank lines skipped)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_scenario(directory: Path | str) -> Scenario:
    """Load ``scenario.yaml`` and, when recorded, ``debezium.jsonl`` from ``directory``."""
    path = Path(directory)
    spec = yaml.safe_load((path / "scenario.yaml").read_text())
    unknown = set(spec) - {"description", "properties", "setup", "during"}
    if unknown:
        raise ValueError(f"{path}/scenario.yaml: unknown keys {sorted(unknown)}")
    properties = {str(k): property_text(v) for k, v in (spec.get("properties") or {}).items()}
    golden = path / "debezium.jsonl"
    return Scenario(
        name=path.name,
        path=path,
        description=str(spec.get("description", "")).strip(),
        properties=properties,
        setup=spec.get("setup") or "",
        during=spec.get("during") or None,
        events=read_jsonl(golden) if golden.exists() else [],
    )


def scenario_dirs(connector: str = "postgres") -> list[Path]:
    """Every scenario directory recorded for ``connector``, sorted by name."""
    root = GOLDEN_ROOT / connector
    return sorted(p.parent for p in root.glob("*/scenario.yaml"))


# --------------------------------------------------------------------------------------------
# Running scenario SQL


def psql_env(host: str, port: int | str, user: str, password: str, dbname: str,
             bindir: Path | str | None = None) -> dict[str, str]:
    """Environment for ``psql`` (and for psql sessions a script starts with ``\\!``)."""
    env = dict(os.environ, PGHOST=host, PGPORT=str(port), PGUSER=user, PGPASSWORD=password,
               PGDATABASE=dbname)
    if bindir:
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_psql_script(server: Any, dbname: str, sql: str, timeout: float = 300.0) -> str:
    """Run ``sql`` with ``psql -f`` against ``server`` (a ``PostgresServer``); return stdout."""
    from headwater.devservers.postgres import pg_bindir

    bindir = pg_bindir()
    env = psql_env("127.0.0.1", server.port, server.superuser, server.password, dbname, bindir)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql)
        script = f.name
    try:
        proc = subprocess.run(
            [str(bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", script],
            capture_output=True, text=True, env=env, timeout=timeout,
        )
    finally:
        os.unlink(script)
    if proc.returncode != 0:
        raise RuntimeError(f"psql failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


# --------------------------------------------------------------------------------------------
# Normalization


#: Debezium 3's run id header, and the form of its value: a version 7 UUID
RUN_ID_HEADER = "__debezium.context.runId"
UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


class _Tokens:
    """Symbolic names for run-dependent numbers, assigned in order of first appearance.

    LSNs get ``L<n>``. With ``separate_commit_lsns`` the commit-side positions (the first
    element of ``source.sequence`` and the LSN of a transaction END id) get their own
    numbering, ``C<n>``: Debezium's "last commit LSN" is the end of the previous commit
    record, which equals the LSN of the next transaction's first record only when no other
    WAL record (a RUNNING_XACTS from the background writer, a checkpoint, autovacuum, another
    database's writes) happened to land in between, so that equality is an accident of the
    WAL layout and not part of the behaviour under test.
    """

    def __init__(self, separate_commit_lsns: bool = True) -> None:
        self.lsns: dict[str, str] = {}
        self.commit_lsns: dict[str, str] = {}
        self.txids: dict[str, str] = {}
        self.runs: dict[str, str] = {}
        self.separate = separate_commit_lsns

    def run_id(self, value: Any) -> Any:
        """A `__debezium.context.runId` header's value (JsonConverter's form, with or without schema):
        a UUIDv7 becomes ``RUN<n>`` (so a list of one run shows one token); anything else stays."""
        with_schema, text = _split(value)
        if not isinstance(text, str) or not UUID7.fullmatch(text):
            return value
        return _join(with_schema, value, self.runs.setdefault(text, f"RUN{len(self.runs) + 1}"))

    def lsn(self, value: Any) -> Any:
        if value is None:
            return None
        return self.lsns.setdefault(str(value), f"L{len(self.lsns) + 1}")

    def commit_lsn(self, value: Any) -> Any:
        if value is None or not self.separate:
            return self.lsn(value)
        return self.commit_lsns.setdefault(str(value), f"C{len(self.commit_lsns) + 1}")

    def txid(self, value: Any) -> Any:
        if value is None:
            return None
        return self.txids.setdefault(str(value), f"X{len(self.txids) + 1}")

    def sequence(self, value: Any) -> Any:
        """``source.sequence`` (``[lastCommitLsn, lsn]`` as a JSON string): replace each number
        in the string, keeping the formatting."""
        if not isinstance(value, str):
            return value
        head, comma, tail = value.partition(",")
        head = _DIGITS.sub(lambda m: self.commit_lsn(m.group(0)), head)
        tail = _DIGITS.sub(lambda m: self.lsn(m.group(0)), tail)
        return head + comma + tail

    def transaction_id(self, value: Any, commit: bool = False) -> Any:
        """``txId:lsn`` (transaction block and transaction topic; ``commit`` for END ids)."""
        if not isinstance(value, str):
            return value
        m = _TX_ID.match(value)
        if not m:
            return value
        lsn = self.commit_lsn(m.group(2)) if commit else self.lsn(m.group(2))
        return f"{self.txid(m.group(1))}:{lsn}"


def _split(record: Any) -> tuple[bool, Any]:
    """(schemas enabled?, payload) of a key or value as JsonConverter writes it."""
    if isinstance(record, dict) and set(record) == {"schema", "payload"}:
        return True, record["payload"]
    return False, record


def _join(with_schema: bool, record: Any, payload: Any) -> Any:
    if with_schema:
        return {"schema": record["schema"], "payload": payload}
    return payload


def is_transaction_record(payload: Any) -> bool:
    """Whether a value payload is a transaction-topic BEGIN/END record."""
    return isinstance(payload, dict) and payload.get("status") in ("BEGIN", "END") and "id" in payload


#: What a logical decoding message counts as in a transaction END's `data_collections`: Debezium
#: names each message by a Java object's `toString()`, `...LogicalDecodingMessageId@<identity hash>`,
#: different in every JVM run; its place in the list (a HashMap's order of those names) varies too.
MESSAGE_COLLECTION = "io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId@<hash>"


def _is_message_collection(entry: Any) -> bool:
    name = entry.get("data_collection") if isinstance(entry, dict) else None
    return isinstance(name, str) and name.startswith(MESSAGE_COLLECTION[:-len("<hash>")])


def _normalize_value(payload: Any, tokens: _Tokens) -> Any:
    if not isinstance(payload, dict):
        return payload
    out = dict(payload)
    for name in WALL_CLOCK_FIELDS:
        out.pop(name, None)
    if is_transaction_record(out):
        out["id"] = tokens.transaction_id(out["id"], commit=out["status"] == "END")
        collections = out.get("data_collections")
        if isinstance(collections, list) and any(_is_message_collection(c) for c in collections):
            out["data_collections"] = sorted(
                (dict(c, data_collection=MESSAGE_COLLECTION) if _is_message_collection(c) else c for c in collections),
                key=lambda c: (c.get("data_collection") or "", c.get("event_count") or 0))
        return out
    source = out.get("source")
    if isinstance(source, dict):
        out["source"] = _normalize_source(source, tokens)
    transaction = out.get("transaction")
    if isinstance(transaction, dict) and "id" in transaction:
        out["transaction"] = dict(transaction, id=tokens.transaction_id(transaction["id"]))
    return out


def _normalize_source(source: dict[str, Any], tokens: _Tokens) -> dict[str, Any]:
    """A `source` block without its wall-clock fields and version, its positions as tokens."""
    source = dict(source)
    for name in SOURCE_DROPPED_FIELDS:
        source.pop(name, None)
    if "txId" in source:
        source["txId"] = tokens.txid(source["txId"])
    if "sequence" in source:
        source["sequence"] = tokens.sequence(source["sequence"])
    if "lsn" in source:
        source["lsn"] = tokens.lsn(source["lsn"])
    return source


def _normalize_header(name: str, value: Any, tokens: _Tokens) -> Any:
    """A header's value: the run id as a token; a `source` block (Kafka's HeaderFrom of `source`) and a
    `transaction` block (of `transaction`) normalized as in a value."""
    if name == RUN_ID_HEADER:
        return tokens.run_id(value)
    with_schema, payload = _split(value)
    if name == "source" and isinstance(payload, dict) and "connector" in payload:
        return _join(with_schema, value, _normalize_source(payload, tokens))
    if name == "transaction" and isinstance(payload, dict) and "total_order" in payload:
        return _join(with_schema, value, dict(payload, id=tokens.transaction_id(payload["id"])))
    return value


def _normalize_event(event: dict[str, Any], tokens: _Tokens, keep_headers: bool) -> dict[str, Any]:
    key_schema, key = _split(event.get("key"))
    value_schema, value = _split(event.get("value"))
    key = copy.deepcopy(key)
    if is_transaction_record(value) and isinstance(key, dict) and "id" in key:
        key = dict(key, id=tokens.transaction_id(key["id"], commit=value["status"] == "END"))
    value = _normalize_value(value, tokens)
    out: dict[str, Any] = {
        "topic": event.get("topic"),
        "key": _join(key_schema, event.get("key"), key),
        "value": _join(value_schema, event.get("value"), value),
    }
    if keep_headers and "headers" in event:
        out["headers"] = {k: _normalize_header(k, v, tokens) for k, v in event["headers"].items()}
    return out


def run_ids(events: Iterable[dict[str, Any]]) -> set[str]:
    """The `__debezium.context.runId` header values of `events` (JsonConverter's form, with or without
    schema)."""
    return {_split(e["headers"][RUN_ID_HEADER])[1] for e in events if RUN_ID_HEADER in (e.get("headers") or {})}


def with_run_id(events: Iterable[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """`events` with every `__debezium.context.runId` header set to `run_id` (events of several runs
    compared with one recorded run)."""
    out = []
    for e in events:
        if RUN_ID_HEADER in (e.get("headers") or {}):
            value = e["headers"][RUN_ID_HEADER]
            with_schema, _ = _split(value)
            e = {**e, "headers": {**e["headers"], RUN_ID_HEADER: _join(with_schema, value, run_id)}}
        out.append(e)
    return out


def normalize(events: Iterable[dict[str, Any]], keep_headers: bool = False,
              separate_commit_lsns: bool = True) -> list[dict[str, Any]]:
    """Events with wall-clock fields dropped and positions replaced by symbolic tokens.

    Dropped: the top-level ``ts_ms``/``ts_us``/``ts_ns`` of every value (change envelope,
    transaction topic, heartbeat) and ``source.ts_ms/ts_us/ts_ns/version``. Tokenized (one
    numbering for the whole list): ``source.lsn``, the numbers inside ``source.sequence``, and
    the LSN part of ``transaction.id`` and of the transaction topic's key/value ``id`` become
    ``L1, L2, ...``; ``source.txId`` and the txId part of those ids become ``X1, X2, ...``.
    Works on events with schemas enabled (``{"schema", "payload"}``) and without. The
    ``headers`` field (which the reference recorder does not capture) is dropped unless
    ``keep_headers``; kept, the ``__debezium.context.runId`` header's UUIDv7 becomes ``RUN<n>``
    (one token per distinct run id, so one run compares equal to another run and two run ids in one
    list show). The input is not modified.
    """
    tokens = _Tokens(separate_commit_lsns)
    return [_normalize_event(e, tokens, keep_headers) for e in events]


def payload_only(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events with ``{"schema", "payload"}`` keys and values replaced by their payloads."""
    out = []
    for event in events:
        e = dict(event)
        e["key"] = _split(event.get("key"))[1]
        e["value"] = _split(event.get("value"))[1]
        out.append(e)
    return out


def is_heartbeat(event: dict[str, Any]) -> bool:
    """Whether an event is a heartbeat (topic ``__debezium-heartbeat.<prefix>``)."""
    return str(event.get("topic", "")).startswith("__debezium-heartbeat")


def collapse_heartbeats(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events with each run of consecutive heartbeats reduced to its first one.

    How many heartbeats fall between two other events depends on timing; where they fall
    (and what they look like) does not.
    """
    out: list[dict[str, Any]] = []
    for event in events:
        if is_heartbeat(event) and out and is_heartbeat(out[-1]):
            continue
        out.append(event)
    return out


# --------------------------------------------------------------------------------------------
# Comparison


def _diff(expected: Any, actual: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, expected, actual) for every leaf where the two differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in list(expected) + [k for k in actual if k not in expected]:
            sub = f"{path}.{k}" if path else str(k)
            if k not in actual:
                yield sub, expected[k], "<missing>"
            elif k not in expected:
                yield sub, "<missing>", actual[k]
            else:
                yield from _diff(expected[k], actual[k], sub)
    elif isinstance(expected, list) and isinstance(actual, list):
        for i in range(max(len(expected), len(actual))):
            sub = f"{path}[{i}]"
            if i >= len(actual):
                yield sub, expected[i], "<missing>"
            elif i >= len(expected):
                yield sub, "<missing>", actual[i]
            else:
                yield from _diff(expected[i], actual[i], sub)
    elif expected != actual or type(expected) is not type(actual):
        yield path, expected, actual


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) and value == "<missing>" else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_event(event: dict[str, Any] | None) -> str:
    """One line saying what an event is: topic, op, key payload."""
    if event is None:
        return "<none>"
    key = _split(event.get("key"))[1]
    value = _split(event.get("value"))[1]
    if value is None:
        kind = "tombstone"
    elif isinstance(value, dict) and "op" in value:
        kind = f"op={value['op']}"
        source = value.get("source")
        if isinstance(source, dict) and value["op"] == "r":
            kind += f" snapshot={source.get('snapshot')}"
    elif is_transaction_record(value):
        kind = f"status={value['status']}"
    else:
        kind = "value"
    return f"{event.get('topic')} {kind} key={_short(key, 80)}"


def events_diff(expected: list[dict[str, Any]], actual: list[dict[str, Any]],
                max_paths: int = 20) -> str | None:
    """A readable account of the first difference between two normalized lists, else None."""
    lines: list[str] = []
    for i in range(max(len(expected), len(actual))):
        exp = expected[i] if i < len(expected) else None
        act = actual[i] if i < len(actual) else None
        if exp == act:
            continue
        lines.append(f"first difference at event #{i} (of {len(expected)} expected, {len(actual)} actual)")
        lines.append(f"  expected: {describe_event(exp)}")
        lines.append(f"  actual:   {describe_event(act)}")
        if exp is not None and act is not None:
            diffs = list(_diff(exp, act))
            for path, e, a in diffs[:max_paths]:
                lines.append(f"  {path}: expected {_short(e)}, got {_short(a)}")
            if len(diffs) > max_paths:
                lines.append(f"  ... and {len(diffs) - max_paths} more differing paths")
        lo = max(0, i - 2)
        lines.append("  context (expected | actual):")
        for j in range(lo, min(i + 3, max(len(expected), len(actual)))):
            e = describe_event(expected[j]) if j < len(expected) else "<none>"
            a = describe_event(actual[j]) if j < len(actual) else "<none>"
            mark = ">" if j == i else " "
            lines.append(f"  {mark} #{j}: {e} | {a}")
        return "\n".join(lines)
    return None


def assert_events_equal(expected: list[dict[str, Any]], actual: list[dict[str, Any]],
                        keep_headers: bool = False, separate_commit_lsns: bool = True) -> None:
    """Normalize both lists (each with its own tokens) and fail on the first difference."""
    message = events_diff(normalize(expected, keep_headers, separate_commit_lsns),
                          normalize(actual, keep_headers, separate_commit_lsns))
    if message:
        raise AssertionError("change events differ from the golden file\n" + message)


# --------------------------------------------------------------------------------------------
# The binlog connectors (MySQL, MariaDB)

BINLOG_POSITION_FIELDS = ("file", "pos", "gtid")


def normalize_binlog(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Binlog events (MariaDB's reference scenarios) with wall-clock fields dropped and the positions a
    replay on another server changes replaced by tokens in order of first appearance: `source.file`
    (`F1`, ...), `source.pos` (`P1`, ...), `source.gtid` and transaction ids (`G1`, ...; MariaDB's
    transaction id is the GTID). `source.version` is dropped; schemas-enabled records are compared by payload."""
    tokens: dict[str, dict[str, str]] = {name: {} for name in BINLOG_POSITION_FIELDS}
    letters = {"file": "F", "pos": "P", "gtid": "G"}

    def token(kind: str, value: Any) -> Any:
        if value is None:
            return None
        found = tokens[kind]
        return found.setdefault(str(value), f"{letters[kind]}{len(found) + 1}")

    out = []
    for event in payload_only(events):
        key, value = copy.deepcopy(event.get("key")), copy.deepcopy(event.get("value"))
        if isinstance(value, dict):
            for name in WALL_CLOCK_FIELDS:
                value.pop(name, None)
            if is_transaction_record(value):
                value["id"] = token("gtid", value["id"])
                if isinstance(key, dict):
                    key["id"] = token("gtid", key["id"])
            source = value.get("source")
            if isinstance(source, dict):
                for name in SOURCE_DROPPED_FIELDS:
                    source.pop(name, None)
                for name in BINLOG_POSITION_FIELDS:
                    if name in source:
                        source[name] = token(name, source[name])
            transaction = value.get("transaction")
            if isinstance(transaction, dict) and "id" in transaction:
                transaction["id"] = token("gtid", transaction["id"])
        out.append({"topic": event.get("topic"), "key": key, "value": value})
    return out
