"""What an ``Emulator(model="gpt-live-…")`` serves: ``/v1/live/sessions`` with a bearer key
(no query, no subprotocol), each connection a new ``LiveServerSession``; and the sideband
``/v1/live/sessions/{session_id}/attach`` to a running one (an unknown or ended id is refused
with 404 before the upgrade)."""

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
ATTACH = "/attach"


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
        attach = _attached_id(path)
        if path != PATH and attach is None:
            text = f"Not found: {path}. This emulator serves GPT-Live at {PATH}"
            return connection.respond(HTTPStatus.NOT_FOUND, text + "\n")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            text = "Missing bearer authentication in header: send 'Authorization: Bearer <key>'"
            return connection.respond(HTTPStatus.UNAUTHORIZED, text + "\n")
        if attach is not None and self._running(attach) is None:
            text = f"No running Live session with id '{attach}'."
            return connection.respond(HTTPStatus.NOT_FOUND, text + "\n")
        return None

    def _running(self, session_id: str) -> LiveServerSession | None:
        for session in self.sessions:
            if session.id == session_id and session.started and not session.finished:
                return session
        return None

    async def handle(self, ws: ServerConnection) -> None:
        assert self.shared is not None
        attach = _attached_id(ws.request.path.partition("?")[0].rstrip("/")) if ws.request else None
        if attach is not None:
            running = self._running(attach)
            if running is None:  # it ended between the check and the upgrade
                await ws.close(1008, "session ended")
                return
            await running.attach(ws)
            return
        session = LiveServerSession(
            self.shared, ws, next(self._numbers), model=self.model, options=self.options
        )
        self.sessions.append(session)
        await session.serve(self.scenario)

    def client(self, base_url: str, context: ssl.SSLContext, **kwargs: Any) -> Any:
        from livebridge.emulator.openai_live.client import live_client

        return live_client(base_url, context, **kwargs)


def _attached_id(path: str) -> str | None:
    """The session id of a sideband path (``/v1/live/sessions/{id}/attach``), else None."""
    head, _, rest = path.partition(PATH + "/")
    if head or not rest.endswith(ATTACH):
        return None
    session_id = rest.removesuffix(ATTACH)
    return session_id if session_id and "/" not in session_id else None
