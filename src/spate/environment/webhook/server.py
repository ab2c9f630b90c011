"""The environment's webhook endpoint: ``POST /api/webhook/<database>/<schema>/<source>``.

Served by the standard library's ``http.server`` (``ThreadingHTTPServer``), one thread per
request: spate depends on no HTTP framework, the endpoint is one POST route, and a request
thread can block on the environment's durable write. It binds ``127.0.0.1`` unless the
``webhook_host`` setting says otherwise.

A request is answered:

* ``200`` once its row is durable (written at one timestamp, like an ``INSERT``): a read that
  starts after the answer sees it;
* ``400`` when the CHECK fails or the body does not decode in the source's format — nothing
  is written;
* ``404`` for a source that is not a webhook source, ``405`` for another method, ``411``
  without a ``Content-Length``, ``413`` for a body over ``webhook_max_body_bytes`` (refused
  before it is read);
* ``503`` when the write fails (the row may or may not be written: retry with care).

spate has one database and one schema: ``<database>`` and ``<schema>`` are accepted as given.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from sqlglot import exp

from spate.repr.types import Datum
from spate.sql.ddl_webhook import WebhookSpec, spec_of

_log: Final = logging.getLogger("spate.environment.webhook")
DEFAULT_MAX_BODY: Final = 2 << 20


class Endpoint:
    """What the server needs of the environment (sans HTTP): a source's spec, secret values,
    and a durable insert."""

    def __init__(
        self,
        definition: Callable[[str], str | None],
        secret: Callable[[str], str],
        insert: Callable[[str, Sequence[Sequence[Datum]]], object],
        record: Callable[[str, int, bool, str | None], object] | None = None,
    ) -> None:
        self._definition = definition
        self._secret = secret
        self._insert = insert
        self._record = record
        self._cache: dict[str, tuple[WebhookSpec, exp.Expr | None]] = {}
        self._lock = threading.Lock()

    def spec(self, name: str) -> tuple[WebhookSpec, exp.Expr | None] | None:
        sql = self._definition(name)
        if sql is None:
            return None
        with self._lock:
            hit = self._cache.get(sql)
        if hit is None:
            spec = spec_of(sql)
            if spec is None:
                return None
            hit = (spec, spec.check.parsed() if spec.check is not None else None)
            with self._lock:
                self._cache[sql] = hit
        return hit

    def handle(self, name: str, headers: dict[str, str], body: bytes) -> tuple[int, str]:
        """The status and message for a POST of ``body`` to source ``name``; a request to a
        webhook source is counted (``record``: the source, the body's bytes, whether it was
        written, why not)."""
        found = self.spec(name)
        if found is None:
            return 404, f"no webhook source {name!r}"
        status, message = self._handle(name, found, headers, body)
        if self._record is not None:
            self._record(name, len(body), status == 200, None if status == 200 else message)
        return status, message

    def refused(self, name: str, message: str) -> None:
        """Count a request to ``name`` refused before its body was read (too big)."""
        if self._record is not None and self.spec(name) is not None:
            self._record(name, 0, False, message)

    def _handle(
        self,
        name: str,
        found: tuple[WebhookSpec, exp.Expr | None],
        headers: dict[str, str],
        body: bytes,
    ) -> tuple[int, str]:
        spec, node = found
        if spec.check is not None:
            assert node is not None
            secrets = {s: self._secret(s) for s in spec.check.secrets()}
            if not spec.check.passes(node, headers=headers, body=body, secrets=secrets):
                return 400, "the request failed the source's CHECK"
        value: Datum
        if spec.body_format == "bytes":
            value = body
        else:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                return 400, "the body is not UTF-8 text"
            if spec.body_format == "json":
                try:
                    value = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
                except (ValueError, RecursionError):
                    return 400, "the body is not JSON"
            else:
                value = text
            if "\x00" in text or (spec.body_format == "json" and "\\u0000" in str(value)):
                return 400, "the body contains a NUL character"
        row: list[Datum] = [value]
        if spec.include_headers:
            row.append(json.dumps({k.lower(): v for k, v in headers.items()}, sort_keys=True))
        try:
            self._insert(name, [row])
        except Exception as e:  # the write's outcome is unknown: the client decides to retry
            _log.warning("webhook %s: write failed: %s", name, e)
            return 503, f"the write failed: {e}"
        return 200, "ok"


class WebhookServer:
    """Serve ``endpoint`` on ``host:port`` (``0``: any free port) in threads of its own."""

    def __init__(
        self, endpoint: Endpoint, host: str, port: int, *, max_body: int = DEFAULT_MAX_BODY
    ) -> None:
        handler = _handler(endpoint, max_body)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="spate-webhook", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


def _handler(endpoint: Endpoint, max_body: int) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "spate-webhook"

        def log_message(self, format: str, *args: object) -> None:
            _log.debug("webhook: " + format, *args)

        def _answer(self, status: int, message: str, *, close: bool = False) -> None:
            data = (message + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            parts = self.path.split("?", 1)[0].split("/")
            if len(parts) != 6 or parts[:3] != ["", "api", "webhook"] or not all(parts[3:]):
                self._answer(404, "POST /api/webhook/<database>/<schema>/<source>", close=True)
                return
            length_text = self.headers.get("Content-Length")
            if length_text is None or not length_text.isdigit():
                self._answer(411, "a Content-Length is required", close=True)
                return
            length = int(length_text)
            if length > max_body:
                message = f"the body is over {max_body} bytes"
                endpoint.refused(parts[5], message)
                self._answer(413, message, close=True)
                return
            body = self.rfile.read(length)
            if len(body) != length:
                self.close_connection = True
                return
            headers = {k: v for k, v in self.headers.items()}
            status, message = endpoint.handle(parts[5], headers, body)
            self._answer(status, message)

        def _refuse(self) -> None:
            self._answer(405, "webhook sources take POST", close=True)

        do_GET = do_PUT = do_DELETE = do_PATCH = _refuse

    return Handler
