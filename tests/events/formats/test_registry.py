"""Schema registries: a local directory (ids durable, stable and shared between processes) and the
HTTP client against a small Confluent-compatible server run by the test (`registry_server`)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from headwater.events.formats.registry import (
    DirectoryRegistry,
    HttpRegistry,
    RegistryError,
    display_url,
    open_registry,
)
from tests.events.formats.registry_server import registry_server

A = '{"type":"record","name":"A","fields":[{"name":"x","type":"int"}]}'
B = '{"type":"record","name":"B","fields":[{"name":"y","type":"string"}]}'
C = '{"type":"record","name":"C","fields":[]}'


def test_directory_ids_are_stable_durable_and_shared(tmp_path: Path) -> None:
    reg = open_registry(str(tmp_path / "reg"))
    assert isinstance(reg, DirectoryRegistry) and reg.url == (tmp_path / "reg").as_uri()
    assert reg.register("t-value", A) == 1
    assert reg.register("t-key", B) == 2
    assert reg.register("u-value", A) == 1  # the same schema, the same id, under any subject
    assert reg.register("t-value", C) == 3
    again = open_registry((tmp_path / "reg").as_uri())  # a restart
    assert isinstance(again, DirectoryRegistry)
    assert [again.register("t-value", s) for s in (C, A)] == [3, 1]
    assert again.versions("t-value") == [1, 3] and again.versions("u-value") == [1]
    assert again.schema(2) == B
    assert (tmp_path / "reg" / "schemas" / "ids" / "3").read_text() == C


def _register_all(root: str, order: list[str], out) -> None:
    reg = open_registry(root)
    out.put({s: reg.register(f"{s[-12:]}-value", s) for s in order})


def test_directory_ids_agree_across_processes(tmp_path: Path) -> None:
    schemas = [f'{{"type":"record","name":"R{i}","fields":[]}}' for i in range(12)]
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_register_all, args=(str(tmp_path), schemas[::step], out)) for step in (1, -1)]
    procs += [ctx.Process(target=_register_all, args=(str(tmp_path), schemas[3:] + schemas[:3], out))]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    merged: dict[str, int] = {}
    for r in results:
        for s, i in r.items():
            assert merged.setdefault(s, i) == i
    assert sorted(merged.values()) == list(range(1, 13))


def test_http_client_against_a_compatible_server() -> None:
    with registry_server(auth="alice:s3cret", refuse='"name":"Bad"') as (url, state):
        with_auth = url.replace("http://", "http://alice:s3cret@")
        reg = open_registry(f"http://127.0.0.1:1,{with_auth}")  # the first URL does not answer
        assert isinstance(reg, HttpRegistry)
        assert reg.register("t-value", A) == 1
        assert reg.register("t-key", B) == 2
        assert reg.register("u-value", A) == 1
        assert reg.register("u-value", A) == 1  # remembered: not asked again
        assert state.subjects == {"t-value": [1], "t-key": [2], "u-value": [1]}
        assert len(state.requests) == 3 and {ct for _, ct in state.requests} == {"application/vnd.schemaregistry.v1+json"}
        with pytest.raises(RegistryError, match="HTTP 409") as refused:
            reg.register("t-value", '{"type":"record","name":"Bad","fields":[]}')
        assert "s3cret" not in str(refused.value)
        with pytest.raises(RegistryError, match="HTTP 401"):
            open_registry(url).register("t-value", C)
    assert display_url(with_auth) == url
    with pytest.raises(RegistryError, match="no schema registry answered"):
        open_registry("http://127.0.0.1:1").register("t-value", A)
    with pytest.raises(ValueError, match="not a schema registry URL"):
        open_registry("ftp://x/y")
