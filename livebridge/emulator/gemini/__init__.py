"""The emulator's Gemini Live side, internal: the per-connection server, the contract checker and
replay."""
