"""Kept so that older imports work: the registry of wire types is :mod:`spate.wire`."""

from __future__ import annotations

from spate.wire import BY_CLS as BY_CLS
from spate.wire import BY_TAG as BY_TAG
from spate.wire import Registration as Registration
from spate.wire import registered_tags as registered_tags
from spate.wire import wire as wire
