"""How soon a failed MCP server is tried again: at once after one failure, then 0.5 s doubling
up to 10 s."""

from __future__ import annotations

from livebridge.mcp.connection import backoff


def test_backoff_doubles_from_half_a_second_up_to_ten() -> None:
    assert [backoff(n) for n in range(1, 9)] == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff(0) == 0.0 and backoff(100) == 10.0
