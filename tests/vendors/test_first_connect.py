"""What the app is told when the session's first connection never opens: what to check, never
that something "is resumed" when nothing was connected."""

from __future__ import annotations

import socket

import pytest
from google import genai

import livebridge
from livebridge.errors import ConnectionLostError, ServerError
from livebridge.protocol.resume import classify_close
from livebridge.vendors.gemini.protocol import GeminiLiveProtocol


def _refusing_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again: connecting is refused


async def test_no_network_on_the_first_connect_names_what_to_check() -> None:
    url = f"https://127.0.0.1:{_refusing_port()}"
    client = genai.Client(api_key="test", http_options={"base_url": url})
    with pytest.raises(ConnectionLostError) as raised:
        async with livebridge.LiveSession.connect(
            client, model="gemini-3.8-live", tools=livebridge.ToolRegistry()
        ):
            pass
    message = str(raised.value)
    assert message.startswith("Could not open a Gemini Live session")
    assert "resumed" not in message and "GOOGLE_GEMINI_BASE_URL" in message


@pytest.mark.parametrize(
    ("code", "reason", "kind"),
    [(None, "network error", ConnectionLostError), (1011, "internal", ServerError)],
)
def test_a_loss_that_would_be_resumed_reads_as_a_failed_open(
    code: int | None, reason: str, kind: type[Exception]
) -> None:
    protocol = GeminiLiveProtocol(livebridge.ToolRegistry())
    decision = classify_close(code, reason)
    assert decision.action == "resume"  # mid-session these are resumed with the newest handle
    error = protocol._first_failure(code, reason, decision, None)
    assert type(error) is kind
    assert "resumed" not in str(error) and "Nothing was connected yet" in str(error)


def test_a_refusal_keeps_its_own_advice() -> None:
    decision = classify_close(1008, "models/nope is not found")
    error = GeminiLiveProtocol(livebridge.ToolRegistry())._first_failure(
        1008, "models/nope is not found", decision, None
    )
    assert error is decision.error and "Check the model name" in str(error)
