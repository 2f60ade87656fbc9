"""Backends: each turns a LaunchSpec into a request for one kind of cluster (pure)."""
