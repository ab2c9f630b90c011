"""The storage side as the compute controller sees it (defined by storage, which implements it):
see :mod:`spate.storage.interface`."""

from __future__ import annotations

from spate.storage.interface import (
    StorageCollectionMetadata,
    StorageCollections,
    StorageFrontiers,
)

__all__ = ["StorageCollectionMetadata", "StorageCollections", "StorageFrontiers"]
