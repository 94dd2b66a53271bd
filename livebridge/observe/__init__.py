"""Watching sessions from outside: observers of the call lifecycle, Prometheus metrics and their
scrape endpoint, and traces."""

__all__: list[str] = []
