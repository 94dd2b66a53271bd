"""``CallPolicy``: the limits one dispatcher (one session) runs its calls under."""

from __future__ import annotations

from dataclasses import dataclass

from livebridge.calls import frame_budget, payloads
from livebridge.calls.sync_handlers import SlotLimiter


@dataclass(frozen=True, slots=True)
class CallPolicy:
    """Limits for one dispatcher (one session).

    ``limiter`` may be shared by many dispatchers so that all sessions of a process together
    keep within what one backend can take (``store.RedisLimiter``: across processes).
    ``max_frame_bytes`` bounds one ``toolResponse`` message (results are cut to fit, fairly
    across a batch); it must hold ``frame_budget.BYTES_PER_CALL`` bytes for each call a turn
    may carry. ``idempotency_ttl`` is how long
    (seconds) a tool's ``idempotency_key`` makes later calls the same request; at most
    ``idempotency_cache`` keys are remembered (the oldest is forgotten first).
    ``remembered_bytes`` bounds the answers a session keeps to answer a re-delivered call id
    again (``livebridge.calls.answered``): each is charged its encoded size plus 512 bytes, and
    the oldest beyond the budget keeps only its kind (a re-delivery then gets
    ``already_answered``, and is still not run).
    ``confirm_window`` is how long (seconds) an irreversible tool's call waits for its turn to be
    confirmed where the vendor may still withdraw it (Gemini): that long without an
    interruption, a cancellation or new input confirms it.
    """

    max_parallel: int = 8
    max_calls_per_turn: int = 16
    timeout: float = 30.0
    max_result_bytes: int = 65_536
    max_frame_bytes: int = payloads.DEFAULT_MAX_FRAME_BYTES
    idempotency_ttl: float = 600.0
    idempotency_cache: int = 4096
    remembered_bytes: int = 262_144
    limiter: SlotLimiter | None = None
    confirm_window: float = 0.5

    def __post_init__(self) -> None:
        if self.max_parallel < 1 or self.max_calls_per_turn < 1:
            raise ValueError("max_parallel and max_calls_per_turn must be at least 1")
        if not self.timeout > 0:
            raise ValueError("timeout must be positive")
        if self.max_result_bytes < 128:
            raise ValueError("max_result_bytes must be at least 128")
        least = max(
            self.max_result_bytes + 1024, frame_budget.BYTES_PER_CALL * self.max_calls_per_turn
        )
        if self.max_frame_bytes < least:
            raise ValueError(
                f"max_frame_bytes must be at least {least}: max_result_bytes + 1024, and"
                f" {frame_budget.BYTES_PER_CALL} bytes for each of max_calls_per_turn"
            )
        if not self.confirm_window >= 0:
            raise ValueError("confirm_window must not be negative")
        if not self.idempotency_ttl >= 0 or self.idempotency_cache < 1:
            raise ValueError("idempotency_ttl must not be negative, idempotency_cache at least 1")
        if self.remembered_bytes < 0:
            raise ValueError("remembered_bytes must not be negative")
