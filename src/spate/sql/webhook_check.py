"""A webhook source's ``CHECK``: a boolean expression over the request, evaluated before
anything is written.

``CHECK (WITH (HEADERS [AS h], BODY [AS b], SECRET s [AS a], …) expr)`` binds the request
headers (a map from lower-case name to text, read with ``h->'name'`` or ``h->>'name'``), the
body and secrets by name, as Materialize does. The expression is parsed with sqlglot and
evaluated here over this subset of SQL: ``=``, ``<>``, ``AND``, ``OR``, ``NOT``, ``IS [NOT]
NULL``, string literals, and the functions ``hmac(data, key, 'sha256' | 'sha1' | 'sha512' |
'md5')`` (bytes), ``decode(text, 'base64' | 'hex')``, ``encode(bytes, 'base64' | 'hex')``,
``constant_time_eq(a, b)``, ``lower``, ``upper``. Text and bytes compare by their bytes, in
constant time. Anything else is refused when the source is created, never at request time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import sqlglot
from sqlglot import exp

from spate.errors import InvalidArgumentValue

Value = str | bytes | bool | None
_DIGESTS: Final = {"sha256", "sha1", "sha512", "sha224", "sha384", "md5"}


class CheckInvalid(InvalidArgumentValue):
    """A CHECK expression outside the supported subset (the message says what)."""


class _Failed(Exception):
    """The expression cannot be evaluated for this request (bad base64…): the check fails."""


@dataclass(frozen=True, slots=True)
class Check:
    """A parsed CHECK: ``names`` maps each bound name to ``headers``, ``body`` or
    ``secret:<name>``; ``expression`` is the SQL text."""

    names: tuple[tuple[str, str], ...]
    expression: str

    def parsed(self) -> exp.Expr:
        try:
            node = sqlglot.parse_one(self.expression, read="postgres")
        except sqlglot.errors.ParseError as e:
            raise CheckInvalid(f"CHECK: cannot parse {self.expression!r}: {e}") from None
        _validate(node, {n for n, _ in self.names})
        return node

    def secrets(self) -> list[str]:
        return [b.split(":", 1)[1] for _, b in self.names if b.startswith("secret:")]

    def passes(
        self,
        node: exp.Expr,
        *,
        headers: Mapping[str, str],
        body: bytes,
        secrets: Mapping[str, str],
    ) -> bool:
        """Whether the request passes (``NULL`` and evaluation failures do not)."""
        env: dict[str, Value | Mapping[str, str]] = {}
        for name, what in self.names:
            if what == "headers":
                env[name] = {k.lower(): v for k, v in headers.items()}
            elif what == "body":
                env[name] = body
            else:
                env[name] = secrets[what.split(":", 1)[1]]
        try:
            return _eval(node, env) is True
        except _Failed:
            return False


_ALLOWED: Final = (
    exp.EQ,
    exp.NEQ,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Paren,
    exp.Is,
    exp.Null,
    exp.Boolean,
    exp.Literal,
    exp.Column,
    exp.Identifier,
    exp.JSONExtract,
    exp.JSONExtractScalar,
    exp.JSONPath,
    exp.JSONPathRoot,
    exp.JSONPathKey,
    exp.Decode,
    exp.Encode,
    exp.Lower,
    exp.Upper,
    exp.Anonymous,
)


def _validate(node: exp.Expr, names: set[str]) -> None:
    for n in node.walk():
        if not isinstance(n, _ALLOWED):
            raise CheckInvalid(f"CHECK: {type(n).__name__} ({n.sql()}) is not supported")
        if isinstance(n, exp.Anonymous) and n.name.lower() not in ("hmac", "constant_time_eq"):
            raise CheckInvalid(f"CHECK: function {n.name} is not supported")
        if isinstance(n, exp.Column) and n.name not in names:
            known = ", ".join(sorted(names)) or "none"
            raise CheckInvalid(f"CHECK: {n.name!r} is not bound by WITH (…); bound: {known}")


def _bytes(v: Value) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    raise _Failed


def _eval(node: exp.Expr, env: Mapping[str, Value | Mapping[str, str]]) -> Value:
    if isinstance(node, exp.Paren):
        return _eval(node.this, env)
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Column):
        v = env[node.name]
        if isinstance(v, Mapping):
            raise _Failed  # the headers map itself is no value
        return v
    if isinstance(node, (exp.JSONExtract, exp.JSONExtractScalar)):
        headers = env.get(node.this.name) if isinstance(node.this, exp.Column) else None
        path = node.expression
        keys = [k for k in path.expressions if isinstance(k, exp.JSONPathKey)]
        if not isinstance(headers, Mapping) or len(keys) != 1:
            raise _Failed
        return headers.get(str(keys[0].this).lower())
    if isinstance(node, (exp.EQ, exp.NEQ)):
        a, b = _eval(node.this, env), _eval(node.expression, env)
        if a is None or b is None:
            return None
        same = hmac.compare_digest(_bytes(a), _bytes(b)) if not isinstance(a, bool) else a == b
        return same if isinstance(node, exp.EQ) else not same
    if isinstance(node, exp.And):
        a, b = _eval(node.this, env), _eval(node.expression, env)
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(node, exp.Or):
        a, b = _eval(node.this, env), _eval(node.expression, env)
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    if isinstance(node, exp.Not):
        a = _eval(node.this, env)
        return None if a is None else not a
    if isinstance(node, exp.Is):
        a = _eval(node.this, env)
        return a is not None if node.args.get("negate") else a is None
    if isinstance(node, (exp.Lower, exp.Upper)):
        a = _eval(node.this, env)
        if a is None:
            return None
        text = a.decode("utf-8", "replace") if isinstance(a, bytes) else str(a)
        return text.lower() if isinstance(node, exp.Lower) else text.upper()
    if isinstance(node, (exp.Decode, exp.Encode)):
        a = _eval(node.this, env)
        charset = str(_eval(node.args["charset"], env)).lower()
        if a is None:
            return None
        try:
            if isinstance(node, exp.Decode):
                raw = _bytes(a)
                if charset == "base64":
                    return base64.b64decode(raw, validate=True)
                if charset == "hex":
                    return bytes.fromhex(raw.decode())
            else:
                if charset == "base64":
                    return base64.b64encode(_bytes(a)).decode()
                if charset == "hex":
                    return _bytes(a).hex()
        except (binascii.Error, ValueError):
            raise _Failed from None
        raise _Failed
    if isinstance(node, exp.Anonymous):
        args = [_eval(a, env) for a in node.expressions]
        if any(a is None for a in args):
            return None
        if node.name.lower() == "constant_time_eq" and len(args) == 2:
            return hmac.compare_digest(_bytes(args[0]), _bytes(args[1]))
        if node.name.lower() == "hmac" and len(args) == 3:
            alg = str(args[2]).lower()
            if alg not in _DIGESTS:
                raise _Failed
            return hmac.new(_bytes(args[1]), _bytes(args[0]), getattr(hashlib, alg)).digest()
    raise _Failed
