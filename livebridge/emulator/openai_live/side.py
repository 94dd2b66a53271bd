"""What an ``Emulator(model="gpt-live-…")`` serves: ``/v1/live/sessions`` with a bearer key
(no query, no subprotocol), each connection a new ``LiveServerSession``."""

from __future__ import annotations

import itertools
import ssl
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response

from livebridge.emulator.openai_live.session import LiveOptions, LiveScenario, LiveServerSession
from livebridge.emulator.shared import Shared

PATH = "/v1/live/sessions"


class LiveSide:
    """The GPT-Live service of one emulator; ``sessions`` are its connections, oldest first."""

    def __init__(
        self,
        model: str,
        scenario: LiveScenario | None,
        shared: Shared | None,
        options: LiveOptions | None = None,
    ) -> None:
        self.model = model
        self.scenario = scenario
        self.shared: Shared | None = shared
        self.options = options or LiveOptions()
        self.sessions: list[LiveServerSession] = []
        self._numbers = itertools.count(1)

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.partition("?")[0].rstrip("/")
        if path != PATH:
            text = f"Not found: {path}. This emulator serves GPT-Live at {PATH}"
            return connection.respond(HTTPStatus.NOT_FOUND, text + "\n")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            text = "Missing bearer authentication in header: send 'Authorization: Bearer <key>'"
            return connection.respond(HTTPStatus.UNAUTHORIZED, text + "\n")
        return None

    async def handle(self, ws: ServerConnection) -> None:
        assert self.shared is not None
        session = LiveServerSession(
            self.shared, ws, next(self._numbers), model=self.model, options=self.options
        )
        self.sessions.append(session)
        await session.serve(self.scenario)

    def client(self, base_url: str, context: ssl.SSLContext, **kwargs: Any) -> Any:
        from livebridge.emulator.openai_live.client import live_client

        return live_client(base_url, context, **kwargs)
