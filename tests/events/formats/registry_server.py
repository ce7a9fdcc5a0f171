"""A tiny Confluent-compatible schema registry for tests: `POST /subjects/<subject>/versions` and
`GET /schemas/ids/<id>`, in memory, on a local port (the real Schema Registry needs Kafka and a JVM).
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _State:
    def __init__(self, auth: str | None):
        self.auth = auth
        self.ids: dict[str, int] = {}
        self.subjects: dict[str, list[int]] = {}
        self.requests: list[tuple[str, str]] = []
        self.texts: list[str] = []
        self.lock = threading.Lock()


@contextmanager
def registry_server(auth: str | None = None, refuse: str | None = None) -> Iterator[tuple[str, _State]]:
    """A running registry: its base URL and state; `auth` ("user:password") required when given;
    a schema holding `refuse` is answered 409 (incompatible), as Confluent's registry answers."""
    state = _State(auth)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _answer(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if state.auth is None:
                return True
            expected = "Basic " + base64.b64encode(state.auth.encode()).decode()
            if self.headers.get("Authorization") == expected:
                return True
            self._answer(401, {"error_code": 401, "message": "Unauthorized"})
            return False

        def do_POST(self) -> None:
            parts = urllib.parse.urlsplit(self.path).path.split("/")
            if len(parts) != 4 or parts[1] != "subjects" or parts[3] != "versions":
                return self._answer(404, {"error_code": 404, "message": "not found"})
            if not self._authorized():
                return None
            subject = urllib.parse.unquote(parts[2])
            schema = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["schema"]
            json.loads(schema)  # a schema is JSON text
            state.requests.append((subject, self.headers.get("Content-Type", "")))
            state.texts.append(schema)
            if refuse and refuse in schema:
                return self._answer(409, {"error_code": 409, "message": "Schema being registered is incompatible"})
            with state.lock:
                schema_id = state.ids.setdefault(schema, len(state.ids) + 1)
                versions = state.subjects.setdefault(subject, [])
                if schema_id not in versions:
                    versions.append(schema_id)
            return self._answer(200, {"id": schema_id})

        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path).path.split("/")
            if len(parts) == 4 and parts[1:3] == ["schemas", "ids"]:
                for text, i in state.ids.items():
                    if str(i) == parts[3]:
                        return self._answer(200, {"schema": text})
            return self._answer(404, {"error_code": 40403, "message": "Schema not found"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
