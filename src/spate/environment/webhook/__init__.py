"""Webhook sources: HTTP POSTs written durably into a source's collection."""
