"""Recording a session's wire traffic to a file, reading it back within bounds, and replaying it
through the emulator."""

__all__: list[str] = []
