"""Timezone conversion: `io.debezium.transforms.TimezoneConverter` (Debezium 3.x semantics).

The timestamp fields of `before` and `after` (and of `source`, when a rule names `source.<field>`)
are converted to `converted.timezone`, a zone name (DST-aware) or a fixed offset `+hh:mm[:ss]`:

- Timestamp, MicroTimestamp, NanoTimestamp and Connect's Timestamp (a UTC wall-clock time): the
  value's date and time read in UTC are taken as the local time of the zone, and the value becomes
  that instant (the number shifted by minus the zone's offset at that local time);
- ZonedTimestamp (ISO text): the same instant written with the zone's offset at the text's local
  date and time; ZonedTime: with the zone's offset now (Debezium reads it from the clock);
- dates and times without a zone are left as they are (Debezium logs that they are unsupported).

A local time in a DST gap or overlap takes the offset before the transition, as Java's
`ZoneRules.getOffset(LocalDateTime)` does. `include.list` or `exclude.list` (not both) hold rules
`source:<table>[:<field>]`, `topic:<topic>[:<field>]` and `<table or topic>:<field>`; a rule without
a prefix takes the prefix of the rule before it, as in Debezium. A field is `before.x`, `after.x`,
`source.x` or `x` (both images). Tombstones and records that are not change envelopes pass.

Column-wise: numeric timestamps are shifted with Arrow's time zone kernels; ISO texts are parsed
once per distinct value.
"""

from __future__ import annotations

import difflib
import re
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.properties import prop
from headwater.events.arrays import valid_mask
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Transform
from headwater.transforms.blocks import rebuild
from headwater.transforms.registry import register

NUMERIC = {"io.debezium.time.Timestamp": "ms", "org.apache.kafka.connect.data.Timestamp": "ms",
           "io.debezium.time.MicroTimestamp": "us", "io.debezium.time.NanoTimestamp": "ns"}
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
ZONED_TIME = "io.debezium.time.ZonedTime"
_OFFSET = re.compile(r"^([+-])(\d{2}):(\d{2})(?::(\d{2}))?$")
_RULE = re.compile(r'^[".\w\s]+(:[".\w\s]+){1,2}$')
_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}(?::\d{2})?)$")
_ISO_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}(?::\d{2})?)$")
_UNIT = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}

#: the clock ZonedTime conversions read the zone's offset from (tests set it)
now: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731


@register
class TimezoneConverter(Transform):
    """Timestamps converted to another time zone (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.TimezoneConverter",)
    SHORT_NAME = "TimezoneConverter"
    OPTIONS = (
        prop("converted.timezone", required=True),
        prop("include.list", "list"),
        prop("exclude.list", "list"),
    )

    def configure(self) -> None:
        tz = self.values["converted.timezone"].strip()
        include, exclude = self.values["include.list"] or [], self.values["exclude.list"] or []
        if include and exclude:
            self.fail("exclude.list", "cannot be given with include.list", "keep one of the two lists")
        for option, rules in (("include.list", include), ("exclude.list", exclude)):
            bad = [r for r in rules if not _RULE.match(r)]
            if bad:
                self.fail(option, f"{bad[0]!r} is not a rule", "use source:<table>[:<field>], topic:<topic>[:<field>] "
                          "or <table or topic>:<field>")
        m = _OFFSET.match(tz)
        if m:
            sign = -1 if m.group(1) == "-" else 1
            self.fixed: int | None = sign * (int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4) or 0))
            self.zone: zoneinfo.ZoneInfo | None = None
        else:
            zones = zoneinfo.available_timezones()
            if tz not in zones:
                close = difflib.get_close_matches(tz, sorted(zones), n=1)
                self.fail("converted.timezone", f"{tz!r} is neither a time zone nor an offset +hh:mm",
                          f"did you mean {close[0]}?" if close else "e.g. America/New_York or +02:00")
            self.fixed, self.zone = None, zoneinfo.ZoneInfo(tz)
        self.mode = "include" if include else "exclude" if exclude else "all"
        self.topics: dict[str, set[str]] = {}
        self.tables: dict[str, set[str]] = {}
        self.plain: dict[str, set[str]] = {}
        prefix = None
        for rule in include or exclude:
            parts = rule.split(":")
            name, field = (parts[0], parts[1]) if len(parts) == 2 else (parts[1], parts[2])
            if parts[0].lower() in ("source", "topic"):
                prefix = parts[0].lower()
                name, field = parts[1], (parts[2] if len(parts) == 3 else None)
            target = self.topics if prefix == "topic" else self.tables if prefix == "source" else self.plain
            fields = target.setdefault(name, set())
            if field is not None:
                fields.add(field)

    def _match(self, table: str | None, topic: str) -> tuple[str | None, set[str]]:
        for names, key in ((self.topics, topic), (self.tables, table), (self.plain, topic), (self.plain, table)):
            if key is not None and key in names:
                return key, names[key]
        return None, set()

    def _plan(self, table: str | None, topic: str) -> tuple[str, set[str]] | None:
        """What to convert for events of `table` on `topic`: (all | include | exclude, fields), or None."""
        matched, fields = self._match(table, topic)
        if self.mode == "all":
            if topic in self.topics or table in self.tables or table in self.plain:
                return None
            return "all", set()
        if self.mode == "include":
            return None if matched is None else ("include", fields) if fields else ("all", set())
        if matched is None:
            return "all", set()
        return ("exclude", fields) if fields else None

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        schema = block.value_schema
        value = block.batch.column("value")
        if schema is None or not str(schema.get("name") or "").endswith(".Envelope") or not valid_mask(value).any():
            return [block]
        source = _child(value, schema, "source")
        tables: list[Any] = [None]
        if source is not None and any(f["field"] == "table" for f in source[1]["fields"]):
            tables = pc.unique(_child(source[0], source[1], "table")[0]).to_pylist()  # type: ignore[index]
        if len(tables) > 1:  # one table per block in practice: else convert each table's rows apart
            column = _child(source[0], source[1], "table")[0]  # type: ignore[index]
            plans = {t: self._plan(t, block.topic) for t in tables}
            out = value
            for t, plan in plans.items():
                if plan is not None:
                    rows = np.asarray(pc.fill_null(pc.equal(column, t), False).to_numpy(zero_copy_only=False))
                    converted = self._convert(out, schema, plan)
                    out = pc.if_else(pa.array(rows), converted, out)
            return [rebuild(block, value=(schema, out))]
        plan = self._plan(tables[0], block.topic)
        if plan is None:
            return [block]
        return [rebuild(block, value=(schema, self._convert(value, schema, plan)))]

    def _convert(self, value: pa.Array, schema: dict, plan: tuple[str, set[str]]) -> pa.Array:
        kind, fields = plan
        per_image: dict[str, set[str]] = {"before": set(), "after": set(), "source": set()}
        for f in fields:
            head, _, rest = f.partition(".")
            if rest and head in per_image:
                per_image[head].add(rest)
            else:
                per_image["before"].add(f)
                per_image["after"].add(f)
        names = [f["field"] for f in schema["fields"]]
        children = [value.field(i) for i in range(len(names))]
        for image in ("before", "after", "source"):
            if image not in names or (image == "source" and not per_image["source"]):
                continue
            i = names.index(image)
            image_schema = schema["fields"][i]
            if image_schema.get("type") != "struct":
                continue
            children[i] = self._image(children[i], image_schema, kind, per_image[image])
        mask = None if value.null_count == 0 else pc.invert(value.is_valid())
        return pa.StructArray.from_arrays(children, names=names, mask=mask)

    def _image(self, struct: pa.Array, schema: dict, kind: str, fields: set[str]) -> pa.Array:
        names = [f["field"] for f in schema["fields"]]
        children = [struct.field(i) for i in range(len(names))]
        for i, f in enumerate(schema["fields"]):
            selected = kind == "all" or (kind == "include") == (f["field"] in fields)
            name = f.get("name")
            if not selected or children[i].null_count == len(children[i]):
                continue
            if name in NUMERIC:
                children[i] = self._numeric(children[i], NUMERIC[name])
            elif name == ZONED_TIMESTAMP:
                children[i] = _map_text(children[i], self._zoned_timestamp)
            elif name == ZONED_TIME:
                children[i] = _map_text(children[i], self._zoned_time)
        mask = None if struct.null_count == 0 else pc.invert(struct.is_valid())
        return pa.StructArray.from_arrays(children, names=names, mask=mask)

    def _numeric(self, column: pa.Array, unit: str) -> pa.Array:
        """UTC wall-clock values re-read as local times of the zone: the instants they are."""
        raw = column.cast(pa.timestamp(unit)) if not pa.types.is_timestamp(column.type) else column
        if self.fixed is not None:
            shifted = pc.subtract(raw.view(pa.int64()), self.fixed * _UNIT[unit])
            return shifted.view(column.type) if pa.types.is_timestamp(column.type) else shifted.cast(column.type)
        assert self.zone is not None
        key = self.zone.key
        instants = pc.assume_timezone(raw, timezone=key, ambiguous="earliest", nonexistent="earliest")
        out = instants.view(pa.int64()).to_numpy(zero_copy_only=False).copy()
        back = pc.local_timestamp(instants).view(pa.int64()).to_numpy(zero_copy_only=False)
        given = raw.view(pa.int64()).to_numpy(zero_copy_only=False)
        gaps = np.flatnonzero(valid_mask(raw) & (back != given))
        for j in gaps:  # a local time in a DST gap: the offset before the transition
            local = datetime(1970, 1, 1) + timedelta(microseconds=int(given[j]) * 1_000_000 // _UNIT[unit])
            offset = self._offset(local)
            out[j] = int(given[j]) - offset * _UNIT[unit]
        result = pa.array(out, pa.int64(), mask=~valid_mask(raw))
        return result.view(column.type) if pa.types.is_timestamp(column.type) else result.cast(column.type)

    def _offset(self, local: datetime) -> int:
        """The zone's offset (seconds) at a local time, the earlier one in a gap or overlap."""
        if self.fixed is not None:
            return self.fixed
        delta = local.replace(tzinfo=self.zone, fold=0).utcoffset()
        assert delta is not None
        return int(delta.total_seconds())

    def _zoned_timestamp(self, text: str) -> str:
        m = _ISO.match(text)
        if m is None:
            return text
        date, hh, mm, ss, frac, off = m.groups()
        local = datetime.fromisoformat(f"{date}T{hh}:{mm}:{ss}")
        instant = local - timedelta(seconds=_offset_seconds(off))
        offset = self._offset(local)
        target = instant + timedelta(seconds=offset)
        return f"{target.strftime('%Y-%m-%dT%H:%M:%S')}{_fraction(frac)}{_offset_id(offset)}"

    def _zoned_time(self, text: str) -> str:
        m = _ISO_TIME.match(text)
        if m is None:
            return text
        hh, mm, ss, frac, off = m.groups()
        offset = self.fixed
        if offset is None:  # the zone's offset at this instant, as Debezium reads it
            delta = now().astimezone(self.zone).utcoffset()
            assert delta is not None
            offset = int(delta.total_seconds())
        seconds = (int(hh) * 3600 + int(mm) * 60 + int(ss) - _offset_seconds(off) + offset) % 86400
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{_fraction(frac)}{_offset_id(offset)}"


def _child(struct: pa.Array, schema: dict, name: str) -> tuple[pa.Array, dict] | None:
    for i, f in enumerate(schema.get("fields") or []):
        if f["field"] == name:
            return struct.field(i), f
    return None


def _map_text(column: pa.Array, fn: Callable[[str], str]) -> pa.Array:
    encoded = pc.dictionary_encode(column)
    mapped = pa.array([fn(t) for t in encoded.dictionary.to_pylist()], pa.string())
    return mapped.take(encoded.indices)


def _offset_seconds(text: str) -> int:
    if text == "Z":
        return 0
    m = _OFFSET.match(text)
    assert m is not None
    sign = -1 if m.group(1) == "-" else 1
    return sign * (int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4) or 0))


def _offset_id(seconds: int) -> str:
    """Java's `ZoneOffset.getId`: Z, or ±hh:mm[:ss]."""
    if seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    s = abs(seconds)
    text = f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}"
    return text + (f":{s % 60:02d}" if s % 60 else "")


def _fraction(digits: str | None) -> str:
    """The fraction of a second as ISO_LOCAL_TIME writes it: no trailing zeros, none when zero."""
    digits = (digits or "").rstrip("0")
    return f".{digits}" if digits else ""
