"""Internal: OpenAI Realtime and chat ``tool_calls``: the wire codec, the protocol (with its calls,
response and error parts), the ``openai`` connector and the non-streaming adapter. The emulator's
OpenAI side is ``livebridge.emulator.openai``."""
