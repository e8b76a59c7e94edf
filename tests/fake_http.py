"""A loopback stand-in for a JSON-over-POST API (OpenAI-compatible endpoints), for clients that must
not reach the network: it records each request and answers from a function, after any queued failures."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonPostServer:
    """Serves `POST {base_url}/...` on 127.0.0.1 until `close()`.

    Each request is recorded as `{"path", "auth" (the Authorization header), "body"}` in `requests`. The
    HTTP statuses in `failures` are answered first, one per request, with `failure(auth)` as the JSON
    body; then every request gets 200 and `reply(body)`. `GET {path}` answers `gets[path]` (404 for a
    path not there), recorded in `got`, apart from `requests`.
    """

    def __init__(
        self,
        reply: Callable[[dict[str, Any]], Any],
        failure: Callable[[str | None], Any] = lambda auth: {"error": "busy"},
    ) -> None:
        self.reply = reply
        self.failure = failure
        self.requests: list[dict[str, Any]] = []
        self.failures: list[int] = []
        self.gets: dict[str, Any] = {}
        self.got: list[str] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with server.lock:
                    server.got.append(self.path)
                found = self.path in server.gets
                self.answer(
                    200 if found else 404, server.gets[self.path] if found else {"detail": "Not Found"}
                )

            def answer(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization")
                with server.lock:
                    server.requests.append({"path": self.path, "auth": auth, "body": body})
                    status = server.failures.pop(0) if server.failures else 200
                self.answer(status, server.reply(body) if status == 200 else server.failure(auth))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
