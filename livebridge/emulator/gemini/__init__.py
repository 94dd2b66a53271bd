"""The emulator's Gemini Live side: the per-connection server, the contract checker and replay."""

__all__: list[str] = []
