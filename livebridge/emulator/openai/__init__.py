"""The emulator's OpenAI Realtime (GA) side, internal: events, the per-connection server and the
contract checker. ``Emulator(protocol="openai")`` serves it without the ``openai`` package; the
client that trusts it (``Emulator.openai_client()``) needs it."""
