"""Schema registries for the Avro formats: a local directory, or a Confluent-compatible registry over HTTP.

A registry gives each schema an id under a subject (`<topic>-key`, `<topic>-value`: Confluent's
TopicNameStrategy) and the id goes into every message in Confluent's wire format. `open_registry`
takes what `schema.registry.url` holds:

- `file:///path` or a plain path: `DirectoryRegistry`, a directory other processes may share.
  `schemas/ids/<id>` holds each schema's text (so a CloudEvents `dataschema` URI,
  `<url>/schemas/ids/<id>`, names a file that holds it), `subjects/<subject>` the ids registered
  under a subject, one a line, in version order. The same schema text always gets the same id,
  under any subject; ids are given under an exclusive lock on `.lock` and written before they are
  used, so they are durable and stable across restarts and processes.
- `http://` or `https://` (comma-separated for several; user and password in the URL as
  Confluent's `basic.auth.credentials.source=URL` takes them): `HttpRegistry`, a client of the
  REST API of Confluent's Schema Registry (`POST /subjects/<subject>/versions` with
  `{"schema": text}` answers `{"id": n}`), which Apicurio's `ccompat` API also serves.

Each registry remembers the ids it was given in this process.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from pathlib import Path

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(RuntimeError):
    """The registry refused a schema or could not be reached."""


class SchemaRegistry(ABC):
    """Schema ids by subject and schema text."""

    def __init__(self, url: str):
        self.url = url
        self._ids: dict[tuple[str, str], int] = {}

    def register(self, subject: str, schema: str) -> int:
        """The id of `schema` (Avro schema text) under `subject`, registered if new."""
        hit = self._ids.get((subject, schema))
        if hit is None:
            hit = self._ids[(subject, schema)] = self._register(subject, schema)
        return hit

    @abstractmethod
    def _register(self, subject: str, schema: str) -> int:
        """Register `schema` under `subject`; its id."""


class DirectoryRegistry(SchemaRegistry):
    """A registry in a local directory (see the module's docstring)."""

    def __init__(self, url: str, root: Path):
        super().__init__(url)
        self.root = root

    def _register(self, subject: str, schema: str) -> int:
        ids_dir = self.root / "schemas" / "ids"
        subjects = self.root / "subjects"
        ids_dir.mkdir(parents=True, exist_ok=True)
        subjects.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(schema.encode()).hexdigest()
        by_hash = self.root / "schemas" / "sha256"
        by_hash.mkdir(exist_ok=True)
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            known = by_hash / digest
            if known.exists():
                schema_id = int(known.read_text())
            else:
                taken = [int(p.name) for p in ids_dir.iterdir() if p.name.isdigit()]
                schema_id = max(taken, default=0) + 1
                _write_atomically(ids_dir / str(schema_id), schema)
                _write_atomically(known, str(schema_id))
            versions = subjects / urllib.parse.quote(subject, safe="")
            listed = versions.read_text().split() if versions.exists() else []
            if str(schema_id) not in listed:
                _write_atomically(versions, "".join(f"{i}\n" for i in [*listed, str(schema_id)]))
        return schema_id

    def schema(self, schema_id: int) -> str:
        """The text of schema `schema_id`."""
        return (self.root / "schemas" / "ids" / str(schema_id)).read_text()

    def versions(self, subject: str) -> list[int]:
        """The ids registered under `subject`, in version order."""
        path = self.root / "subjects" / urllib.parse.quote(subject, safe="")
        return [int(i) for i in path.read_text().split()] if path.exists() else []


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class HttpRegistry(SchemaRegistry):
    """A client of a Confluent-compatible schema registry's REST API."""

    def __init__(self, url: str, timeout: float = 30.0):
        super().__init__(url)
        self.timeout = timeout
        self.bases = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]

    def _register(self, subject: str, schema: str) -> int:
        body = json.dumps({"schema": schema}).encode()
        problems = []
        for base in self.bases:
            url, auth = _without_userinfo(base)
            request = urllib.request.Request(f"{url}/subjects/{urllib.parse.quote(subject, safe='')}/versions",
                                             data=body, method="POST",
                                             headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
            if auth:
                request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    return int(json.loads(answer.read())["id"])
            except urllib.error.HTTPError as exc:  # the registry answered: another URL would answer the same
                detail = exc.read().decode(errors="replace")[:500]
                raise RegistryError(f"schema registry {url} refused the schema of subject {subject}: "
                                    f"HTTP {exc.code} {detail}") from None
            except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
                problems.append(f"{url}: {exc}")
        raise RegistryError("no schema registry answered: " + "; ".join(problems))


def _without_userinfo(url: str) -> tuple[str, str | None]:
    """The URL without `user:password@` (never printed), and that user info."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    clean = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    return clean, f"{user}:{password}"


def display_url(url: str) -> str:
    """A registry URL as it may be shown: without passwords."""
    return ",".join(_without_userinfo(u.strip())[0] for u in url.split(","))


def open_registry(url: str) -> SchemaRegistry:
    """The registry `schema.registry.url` names (see the module's docstring)."""
    scheme = urllib.parse.urlsplit(url.split(",")[0].strip()).scheme.lower()
    if scheme in ("http", "https"):
        return HttpRegistry(url)
    if scheme == "file":
        return DirectoryRegistry(url, Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)))
    if scheme and len(scheme) > 1:
        raise ValueError(f"not a schema registry URL: {display_url(url)} (file:///path, a path, or http(s)://)")
    root = Path(url).expanduser().resolve()
    return DirectoryRegistry(root.as_uri(), root)
