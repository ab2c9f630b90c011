"""``python -m spate``: the same as the ``spate`` command."""

from __future__ import annotations

from spate.cli import main

main()
