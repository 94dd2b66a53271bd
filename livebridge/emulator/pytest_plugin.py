"""pytest plugin (registered through the ``pytest11`` entry point): the ``live_emulator`` fixture
(and ``live_openai_emulator``, the same speaking OpenAI Realtime).

The emulator serves from its own thread, so the fixture's setup and teardown are plain awaits and
work with pytest-asyncio running them in different tasks, in strict mode (mark the test
``@pytest.mark.asyncio``) and in auto mode alike. ``live_emulator.violations`` is final once the
client's ``async with`` has exited: reading it waits for connections the client has closed to be
judged. ``await live_emulator.settled()`` waits for every connection to end. The fixture needs
pytest-asyncio; without it the plugin defines nothing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

from livebridge.emulator.server import Emulator

if importlib.util.find_spec("pytest_asyncio") is not None:
    import pytest_asyncio

    @pytest_asyncio.fixture
    async def live_emulator() -> AsyncIterator[Emulator]:
        """A running emulator with the default rule-based model; ``emu.client()`` connects."""
        async with Emulator() as emulator:
            yield emulator

    @pytest_asyncio.fixture
    async def live_openai_emulator() -> AsyncIterator[Emulator]:
        """The same, speaking OpenAI Realtime; ``emu.openai_client()`` connects."""
        async with Emulator(protocol="openai") as emulator:
            yield emulator
