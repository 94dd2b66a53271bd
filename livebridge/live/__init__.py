"""The realtime session: the actor shell (``session``), its options and events, the transport seam
a connector opens, the vendor-free protocol skeleton, the outbox, and the reconnect policy."""

__all__: list[str] = []
