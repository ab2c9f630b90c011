"""Kept so that older imports work: the strict msgpack value codec is :mod:`spate.codec`."""

from __future__ import annotations

from spate.codec import MAX_DEPTH as MAX_DEPTH
from spate.codec import decode as decode
from spate.codec import decode_any as decode_any
from spate.codec import decode_message as decode_message
from spate.codec import encode as encode
from spate.codec import encode_message as encode_message
from spate.wire import registered_tags as registered_tags
from spate.wire import wire as wire
