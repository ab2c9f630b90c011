"""Webhook CHECK expressions and the endpoint's answers, without HTTP."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence

import pytest

from spate.environment.webhook.server import Endpoint
from spate.repr.types import Datum
from spate.sql.ddl_webhook import spec_of
from spate.sql.webhook_check import Check, CheckInvalid

SQL = (
    "CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON INCLUDE HEADERS CHECK (WITH (HEADERS, "
    "BODY AS b, SECRET s AS key) decode(headers->>'x-sig', 'hex') = hmac(b, key, 'sha256'))"
)


def _sig(body: bytes, key: str = "k3y") -> str:
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def _endpoint(sql: str = SQL) -> tuple[Endpoint, list[tuple[str, list[list[Datum]]]]]:
    written: list[tuple[str, list[list[Datum]]]] = []

    def insert(name: str, rows: Sequence[Sequence[Datum]]) -> None:
        written.append((name, [list(r) for r in rows]))

    defs = {"w": sql, "t": "CREATE TABLE t (a int)"}
    return Endpoint(defs.get, lambda name: {"s": "k3y"}[name], insert), written


def test_signed_requests_pass_and_are_written_with_headers() -> None:
    endpoint, written = _endpoint()
    body = b'{"a": 1,  "b": [true]}'
    status, _ = endpoint.handle("w", {"X-Sig": _sig(body)}, body)
    assert status == 200
    ((name, [[value, headers]]),) = written
    assert name == "w" and json.loads(str(value)) == {"a": 1, "b": [True]}
    assert json.loads(str(headers)) == {"x-sig": _sig(body)}


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"X-Sig": _sig(b"{}", "wrong")}, b"{}", 400),
        ({"X-Sig": "zz-not-hex"}, b"{}", 400),
        ({}, b"{}", 400),
        ({"X-Sig": _sig(b"{nope")}, b"{nope", 400),
        ({"X-Sig": _sig(b"\xff")}, b"\xff", 400),
    ],
)
def test_refused_requests_write_nothing(headers: dict[str, str], body: bytes, status: int) -> None:
    endpoint, written = _endpoint()
    assert endpoint.handle("w", headers, body)[0] == status
    assert written == []


def test_unknown_sources_and_tables_are_not_webhooks() -> None:
    endpoint, written = _endpoint()
    assert endpoint.handle("nope", {}, b"x")[0] == 404
    assert endpoint.handle("t", {}, b"x")[0] == 404
    assert written == []


def test_text_and_bytes_bodies_without_check() -> None:
    endpoint, written = _endpoint("CREATE SOURCE w FROM WEBHOOK BODY FORMAT BYTES")
    assert endpoint.handle("w", {}, b"\xff\x00")[0] == 200
    assert written == [("w", [[b"\xff\x00"]])]
    spec = spec_of("CREATE SOURCE w FROM WEBHOOK BODY FORMAT TEXT")
    assert spec is not None and spec.desc().names == ("body",)


def test_expressions_outside_the_subset_are_refused() -> None:
    for text in ("b LIKE 'x%'", "pg_sleep(1) IS NULL", "nope = 'x'"):
        with pytest.raises(CheckInvalid):
            Check((("b", "body"),), text).parsed()


def test_three_valued_logic_and_constant_time_eq() -> None:
    check = Check(
        (("h", "headers"), ("b", "body")),
        "constant_time_eq(h->>'t', 'yes') OR (h->>'missing' IS NULL AND lower(b) = 'abc')",
    )
    node = check.parsed()
    assert check.passes(node, headers={"T": "yes"}, body=b"", secrets={})
    assert check.passes(node, headers={}, body=b"ABC", secrets={})
    assert not check.passes(node, headers={"missing": "1"}, body=b"ABC", secrets={})
