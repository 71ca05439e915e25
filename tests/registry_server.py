"""A small server speaking the Schema Registry's REST API (GET only) over the answers saved in
fixtures/values/schemas: /schemas/ids/ID, /schemas/ids/ID/versions, /schemas/guids/GUID,
/subjects/S/versions/V and the list /schemas (paged by offset and limit), with basic or bearer
auth checked and the registry's error JSON for what it does not hold (401, 404 40403/40401)."""
from __future__ import annotations

import json
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kwire_cli.values import DirectoryAnswers

SCHEMAS = Path(__file__).resolve().parents[1] / "fixtures" / "values" / "schemas"


def listing() -> list[dict]:
    """GET /schemas?deleted=true: every version of every subject, as a registry lists them."""
    out = []
    for file in sorted((SCHEMAS / "subjects").glob("*/versions/*.json")):
        out.append(json.loads(file.read_text()))
    return sorted(out, key=lambda e: (e["id"], e["subject"]))


class Registry(ThreadingHTTPServer):
    def __init__(self, auth: str | None):
        self.auth = auth
        self.requests: list[str] = []
        super().__init__(("127.0.0.1", 0), RegistryHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class RegistryHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.server.requests.append(self.path)
        if self.server.auth is not None and self.headers.get("Authorization") != self.server.auth:
            return self.answer(401, {"error_code": 401, "message": "Unauthorized"})
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/schemas":
            query = urllib.parse.parse_qs(url.query)
            offset, limit = int(query.get("offset", ["0"])[0]), int(query.get("limit", ["-1"])[0])
            entries = listing()[offset:]
            return self.answer(200, entries if limit < 0 else entries[:limit])
        parts = url.path.strip("/").split("/")
        file = DirectoryAnswers(SCHEMAS)._file(url.path)
        if file is not None and file.is_file():
            return self.answer(200, json.loads(file.read_text()))
        if parts[:2] == ["schemas", "ids"]:
            return self.answer(404, {"error_code": 40403, "message": f"Schema {parts[2]} not found"})
        return self.answer(404, {"error_code": 40401, "message": "Subject not found"})
