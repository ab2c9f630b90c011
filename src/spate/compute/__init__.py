"""Compute: the controller of compute instances (``spate.compute.controller``) and, later, the
compute replica (``spate.compute.replica``)."""
