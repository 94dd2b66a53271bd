"""Internal: everything one vendor's API says, one folder each: wire codec, sans-I/O protocol,
connector, answer encoder and non-streaming adapter. Adding a vendor is a new folder plus one line
in ``livebridge.live.vendors``. The non-streaming adapters are public as
``livebridge.adapters.gemini``, ``.openai`` and ``.anthropic``."""
