"""Internal: Gemini Live and ``generate_content``: the wire codec, the protocol, the google-genai
connector, the ``toolResponse`` encoder and the non-streaming adapter. The emulator's Gemini side is
``livebridge.emulator.gemini``."""
