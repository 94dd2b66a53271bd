"""Internal: the sans-I/O base every vendor implements: the connection state table and the actions a
protocol asks for (``actions``), ``LiveProtocol`` and the ``Connector`` seam (``base``), the
app's events, the outbox, the reporter, the reconnect policy, and the transport seam with the
vendor-free websocket handling a connector uses. Nothing here knows a vendor, a store or a
recording: they sit above it."""
