"""Recording a session's wire traffic to a file, reading it back within bounds, and replaying it
through the emulator: a public module, with ``livebridge.recording.replay``.

A session records with ``SessionOptions(record=PATH)``; ``read_recording`` reads a file back as
a ``Recording``; ``livebridge.recording.replay.replay`` (``assert_replays`` in a synchronous
test) plays it against the app's tools and returns the ``ReplayReport`` of every
``Divergence``. The names are loaded on first use: importing this module loads no SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livebridge.lazy import exports

if TYPE_CHECKING:
    from livebridge.recording.read import Recording, read_recording
    from livebridge.recording.report import Divergence, ReplayReport

#: Where each name lives; read on first access of the name.
_HOMES: dict[str, str] = {
    "Divergence": "livebridge.recording.report",
    "Recording": "livebridge.recording.read",
    "ReplayReport": "livebridge.recording.report",
    "read_recording": "livebridge.recording.read",
}

__all__ = ["Divergence", "Recording", "ReplayReport", "read_recording"]


__getattr__, __dir__ = exports(__name__, _HOMES, __all__)
