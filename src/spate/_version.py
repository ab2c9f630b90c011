"""The package's version, on the ground floor: ``spate.__version__``, the replica protocol's
hello and the command line all read it from here."""

from __future__ import annotations

__version__ = "0.1.0"
